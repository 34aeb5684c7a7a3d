//! Embeds the Rust SDK's sources (`guest-sdk/src`) in the binary for
//! `envhost new --lang rust`, which writes a vendored copy of them into the
//! new project: the list of files is read here, so a file added to the SDK
//! is carried along without touching `new_project`.

use std::fmt::Write as _;
use std::path::Path;
use std::{env, fs};

fn main() {
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let sdk = Path::new(&manifest).join("../../guest-sdk");
    let src = sdk.join("src");
    // A directory: cargo reruns this when anything under it changes.
    println!("cargo::rerun-if-changed={}", src.display());
    let mut files: Vec<String> = fs::read_dir(&src)
        .expect("guest-sdk/src is readable")
        .map(|entry| entry.expect("a directory entry").file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The Rust SDK's sources: (path in the SDK, text).\nconst RUST_SDK_SOURCES: &[(&str, &str)] = &[\n",
    );
    for name in files {
        let path = src.join(&name).canonicalize().expect("an SDK source");
        writeln!(
            out,
            "    (\"src/{name}\", include_str!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    out.push_str("];\n");
    let target = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("rust_sdk.rs");
    fs::write(target, out).expect("OUT_DIR is writable");
}
