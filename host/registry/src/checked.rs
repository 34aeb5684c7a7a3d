//! The check every byte from the network goes through: read into memory
//! as it streams, never past a bound, the component preamble as soon as it
//! is in, then the exact size and the sha256.

use futures_util::StreamExt as _;

use crate::digest::{Hasher, Sha256};
use crate::error::Error;
use crate::layout;

/// Reads a stream into memory, checking as the bytes arrive: never more
/// than `limit` (or the `declared` size), the component preamble as soon as
/// 8 bytes are in, and at the end the exact size and the sha256.
pub(crate) async fn read_checked(
    mut stream: crate::transfer::BodyStream,
    what: &str,
    host: &str,
    declared: Option<u64>,
    limit: u64,
    expected: Option<Sha256>,
    is_component: bool,
) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
    let mut hasher = Hasher::default();
    let mut preamble_checked = !is_component;
    let bound = declared.unwrap_or(limit).min(limit);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Error::Network {
            what: what.to_owned(),
            host: host.to_owned(),
            detail: e.to_string(),
        })?;
        if hasher.len() + chunk.len() as u64 > bound {
            return Err(match declared {
                Some(declared) if declared <= limit => Error::Size {
                    what: what.to_owned(),
                    expected: declared,
                    actual: hasher.len() + chunk.len() as u64,
                },
                _ => Error::TooLarge {
                    what: what.to_owned(),
                    size: hasher.len() + chunk.len() as u64,
                    limit,
                },
            });
        }
        hasher.update(&chunk);
        bytes.extend_from_slice(&chunk);
        if !preamble_checked && bytes.len() >= 8 {
            layout::check_component_preamble(&bytes, what)?;
            preamble_checked = true;
        }
    }
    if let Some(declared) = declared
        && hasher.len() != declared
    {
        return Err(Error::Size {
            what: what.to_owned(),
            expected: declared,
            actual: hasher.len(),
        });
    }
    if !preamble_checked {
        layout::check_component_preamble(&bytes, what)?;
    }
    let actual = hasher.finish();
    if let Some(expected) = expected
        && actual != expected
    {
        return Err(Error::digest(what.to_owned(), &expected, &actual));
    }
    Ok(bytes)
}
pub(crate) fn read_file(path: &std::path::Path, limit: u64, what: &str) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| Error::io("reading", path, e))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("reading", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            what: what.to_owned(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}
