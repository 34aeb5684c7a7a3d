//! The CNCF layout of a WebAssembly artifact in an OCI registry (TAG
//! Runtime's "Wasm OCI Artifact" layout, the one `wkg`, `oras` and
//! `oci-wasm` use): an OCI image manifest whose config has media type
//! `application/vnd.wasm.config.v0+json` and which has exactly one layer,
//! `application/wasm`, the component's bytes.
//!
//! This module checks manifests and configs it is given and builds the ones
//! `publish` pushes. It knows nothing of the network, and nothing of the
//! host's WIT contract (the host checks a component against that itself).

use serde::{Deserialize, Serialize};

use crate::digest::Sha256;
use crate::error::Error;

/// An OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The config of a WebAssembly artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// A WebAssembly component (or module) as a layer.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
pub const ARCHITECTURE: &str = "wasm";
/// The `os` of a component (a core module would say `wasip1`).
pub const COMPONENT_OS: &str = "wasip2";

/// Manifests larger than this are refused (the reference registry refuses
/// to store manifests over 4 MiB; a Wasm manifest is well under 1 KiB).
pub const MAX_MANIFEST_SIZE: u64 = 4 << 20;
/// Configs larger than this are refused (they hold a list of import and
/// export names).
pub const MAX_CONFIG_SIZE: u64 = 1 << 20;

/// A content descriptor in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// An OCI image manifest (the fields this layout uses).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// The config blob, `application/vnd.wasm.config.v0+json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Who published it, when they said.
    pub author: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// `wasip2` for a component, `wasip1` for a core module.
    pub os: String,
    #[serde(default)]
    /// The digests of the manifest's layers, in order.
    pub layer_digests: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What the component imports and exports.
    pub component: Option<ComponentInfo>,
}

/// What a component imports and exports, by the names at its top level
/// (`wasi:io/streams@0.2.0`, `envhost:environment/plugin@0.1.0`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentInfo {
    #[serde(default)]
    /// Export names.
    pub exports: Vec<String>,
    #[serde(default)]
    /// Import names.
    pub imports: Vec<String>,
    /// The world the component targets, when its publisher named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The two blobs a checked manifest points at.
#[derive(Debug, Clone)]
pub(crate) struct WasmManifest {
    pub config: Descriptor,
    pub config_digest: Sha256,
    pub layer: Descriptor,
    pub layer_digest: Sha256,
}

/// Checks a manifest's bytes against the layout; `what` names it in errors.
pub(crate) fn check_manifest(
    bytes: &[u8],
    what: &str,
    max_layer_size: u64,
) -> Result<WasmManifest, Error> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| Error::Layout {
        what: what.to_owned(),
        problem: format!("its manifest is not JSON ({e})"),
    })?;
    let media_type = value.get("mediaType").and_then(|v| v.as_str());
    // `mediaType` is optional in an image manifest (the Content-Type says
    // it); a manifest without it is taken as one unless it lists manifests.
    let untyped_image = media_type.is_none() && value.get("manifests").is_none();
    if media_type != Some(MANIFEST_MEDIA_TYPE) && !untyped_image {
        let found = media_type.unwrap_or("none").to_owned();
        let hint = match media_type {
            Some(INDEX_MEDIA_TYPE)
            | Some("application/vnd.docker.distribution.manifest.list.v2+json") => {
                "it is an index of several images (a multi-platform container image?); point at a WebAssembly component pushed with `envhost publish`, `wkg oci push` or `oras push`"
            }
            _ => {
                "push the component as an OCI image manifest (`envhost publish`, `wkg oci push` or `oras push`)"
            }
        };
        return Err(Error::MediaType {
            what: format!("the manifest of {what}"),
            expected: MANIFEST_MEDIA_TYPE.to_owned(),
            found,
            hint: hint.to_owned(),
        });
    }
    let manifest: Manifest = serde_json::from_value(value).map_err(|e| Error::Layout {
        what: what.to_owned(),
        problem: format!("its manifest does not have the fields an OCI image manifest has ({e})"),
    })?;
    if manifest.schema_version != 2 {
        return Err(Error::Layout {
            what: what.to_owned(),
            problem: format!(
                "its manifest has schemaVersion {}; OCI image manifests have 2",
                manifest.schema_version
            ),
        });
    }
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(Error::MediaType {
            what: format!("the config of {what}"),
            expected: CONFIG_MEDIA_TYPE.to_owned(),
            found: manifest.config.media_type,
            hint: "it is not a WebAssembly artifact in the CNCF layout; publish the component with `envhost publish` (or `oras push --config config.json:application/vnd.wasm.config.v0+json`)".to_owned(),
        });
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(Error::Layout {
            what: what.to_owned(),
            problem: format!(
                "it has {} layers; a WebAssembly component artifact has exactly one ({LAYER_MEDIA_TYPE})",
                manifest.layers.len()
            ),
        });
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(Error::MediaType {
            what: format!("the layer of {what}"),
            expected: LAYER_MEDIA_TYPE.to_owned(),
            found: layer.media_type.clone(),
            hint: "it is not a WebAssembly component artifact; publish the .wasm file with `envhost publish`".to_owned(),
        });
    }
    let config_digest = descriptor_digest(&manifest.config, what, "config")?;
    let layer_digest = descriptor_digest(layer, what, "layer")?;
    if manifest.config.size > MAX_CONFIG_SIZE {
        return Err(Error::TooLarge {
            what: format!("the config of {what}"),
            size: manifest.config.size,
            limit: MAX_CONFIG_SIZE,
        });
    }
    if layer.size > max_layer_size {
        return Err(Error::TooLarge {
            what: format!("the component of {what}"),
            size: layer.size,
            limit: max_layer_size,
        });
    }
    Ok(WasmManifest {
        config: manifest.config.clone(),
        config_digest,
        layer: layer.clone(),
        layer_digest,
    })
}

fn descriptor_digest(descriptor: &Descriptor, what: &str, role: &str) -> Result<Sha256, Error> {
    descriptor.digest.parse().map_err(|_| Error::Layout {
        what: what.to_owned(),
        problem: format!(
            "its {role} digest {:?} is not a sha256 digest (the only algorithm supported)",
            descriptor.digest
        ),
    })
}

/// Checks a config blob (already verified against its digest).
pub(crate) fn check_config(bytes: &[u8], what: &str, layer: &Sha256) -> Result<WasmConfig, Error> {
    let config: WasmConfig = serde_json::from_slice(bytes).map_err(|e| Error::Layout {
        what: what.to_owned(),
        problem: format!("its config is not a WebAssembly config ({e})"),
    })?;
    if config.architecture != ARCHITECTURE {
        return Err(Error::Layout {
            what: what.to_owned(),
            problem: format!(
                "its config says architecture {:?}; a WebAssembly artifact says {ARCHITECTURE:?}",
                config.architecture
            ),
        });
    }
    if config.os != COMPONENT_OS {
        return Err(Error::NotAComponent {
            what: what.to_owned(),
            found: format!(
                "an artifact for {:?} (its config's os); envhost loads components ({COMPONENT_OS})",
                config.os
            ),
        });
    }
    if !config.layer_digests.is_empty() && config.layer_digests != [layer.to_string()] {
        return Err(Error::Layout {
            what: what.to_owned(),
            problem: format!(
                "its config lists layer digests {:?}, but its manifest's layer is {layer}",
                config.layer_digests
            ),
        });
    }
    Ok(config)
}

/// Refuses what the first bytes of a layer show is not a component: a
/// core module, or not WebAssembly at all. `head` holds at least the first
/// 8 bytes, or the whole blob if it is shorter.
pub(crate) fn check_component_preamble(head: &[u8], what: &str) -> Result<(), Error> {
    if wasmparser::Parser::is_component(head) {
        return Ok(());
    }
    let found = if wasmparser::Parser::is_core_wasm(head) {
        "a core WebAssembly module, not a component; build it as a component (`cargo build --target wasm32-wasip2`, or `wasm-tools component new`)".to_owned()
    } else if head.starts_with(b"\0asm") {
        "WebAssembly of an unknown version, not a component".to_owned()
    } else {
        "not WebAssembly (it does not start with the `\\0asm` magic number)".to_owned()
    };
    Err(Error::NotAComponent {
        what: what.to_owned(),
        found,
    })
}

/// The names a component imports and exports at its top level.
pub fn component_info(bytes: &[u8]) -> Result<ComponentInfo, wasmparser::BinaryReaderError> {
    use wasmparser::Payload;
    let mut info = ComponentInfo::default();
    // Nested modules and components have sections of their own; only the
    // outermost component's imports and exports are the artifact's.
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    info.imports.push(import?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    info.exports.push(export?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

/// The config `publish` pushes for a component.
pub(crate) fn config_for(layer: &Sha256, component: ComponentInfo, created: String) -> WasmConfig {
    WasmConfig {
        created: Some(created),
        author: None,
        architecture: ARCHITECTURE.to_owned(),
        os: COMPONENT_OS.to_owned(),
        layer_digests: vec![layer.to_string()],
        component: Some(component),
    }
}

/// The annotation `oras pull` names the pulled file by.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// The manifest `publish` pushes; `title` is the layer's file name.
pub(crate) fn manifest_for(config: &[u8], layer: &[u8], title: &str) -> Manifest {
    Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        artifact_type: None,
        config: Descriptor {
            media_type: CONFIG_MEDIA_TYPE.to_owned(),
            digest: Sha256::of(config).to_string(),
            size: config.len() as u64,
            annotations: None,
        },
        layers: vec![Descriptor {
            media_type: LAYER_MEDIA_TYPE.to_owned(),
            digest: Sha256::of(layer).to_string(),
            size: layer.len() as u64,
            annotations: Some([(TITLE_ANNOTATION.to_owned(), title.to_owned())].into()),
        }],
        annotations: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPONENT_HEAD: &[u8] = b"\0asm\x0d\x00\x01\x00";
    const MODULE_HEAD: &[u8] = b"\0asm\x01\x00\x00\x00";

    fn manifest_json(config_type: &str, layers: &[(&str, u64)]) -> Vec<u8> {
        let digest = Sha256::of(b"x").to_string();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": config_type, "digest": digest, "size": 10},
            "layers": layers.iter().map(|(media_type, size)| serde_json::json!({
                "mediaType": media_type, "digest": digest, "size": size
            })).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn the_cncf_layout_is_accepted() {
        let bytes = manifest_json(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 100)]);
        let checked = check_manifest(&bytes, "x", 1000).unwrap();
        assert_eq!(checked.layer.size, 100);
        assert_eq!(checked.layer_digest, Sha256::of(b"x"));
    }

    #[test]
    fn other_layouts_are_refused_with_what_was_found() {
        let cases: [(Vec<u8>, &str); 6] = [
            (
                manifest_json("application/vnd.oci.image.config.v1+json", &[(LAYER_MEDIA_TYPE, 1)]),
                "application/vnd.oci.image.config.v1+json",
            ),
            (
                manifest_json(CONFIG_MEDIA_TYPE, &[("application/vnd.oci.image.layer.v1.tar+gzip", 1)]),
                "application/vnd.oci.image.layer.v1.tar+gzip",
            ),
            (manifest_json(CONFIG_MEDIA_TYPE, &[]), "0 layers"),
            (
                manifest_json(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 1), (LAYER_MEDIA_TYPE, 1)]),
                "2 layers",
            ),
            (manifest_json(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, 5000)]), "limit"),
            (
                serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": []})).unwrap(),
                "multi-platform",
            ),
        ];
        for (bytes, expected) in cases {
            let error = check_manifest(&bytes, "x", 1000).unwrap_err().to_string();
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn preamble_tells_components_from_modules_and_other_bytes() {
        assert!(check_component_preamble(COMPONENT_HEAD, "x").is_ok());
        let module = check_component_preamble(MODULE_HEAD, "x")
            .unwrap_err()
            .to_string();
        assert!(module.contains("core WebAssembly module"), "{module}");
        let random = check_component_preamble(b"#!/bin/sh\n", "x")
            .unwrap_err()
            .to_string();
        assert!(random.contains("not WebAssembly"), "{random}");
        let short = check_component_preamble(b"\0a", "x")
            .unwrap_err()
            .to_string();
        assert!(short.contains("not WebAssembly"), "{short}");
    }

    #[test]
    fn config_checks() {
        let layer = Sha256::of(b"layer");
        let good = serde_json::to_vec(&config_for(
            &layer,
            ComponentInfo::default(),
            "2026-01-01T00:00:00Z".into(),
        ))
        .unwrap();
        assert!(check_config(&good, "x", &layer).is_ok());
        let other_layer = check_config(&good, "x", &Sha256::of(b"other"))
            .unwrap_err()
            .to_string();
        assert!(other_layer.contains("layer digests"), "{other_layer}");
        let module = br#"{"architecture":"wasm","os":"wasip1","layerDigests":[]}"#;
        let error = check_config(module, "x", &layer).unwrap_err().to_string();
        assert!(error.contains("wasip1"), "{error}");
    }
}
