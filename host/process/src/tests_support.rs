//! What the unit tests share.

/// A test whose mechanism (`what`) this machine lacks (`why`) fails,
/// unless ENVHOST_SKIP_PRIVILEGED=1 says to skip it (CI runs as root).
pub fn skip_unprivileged(what: &str, why: &str) {
    let opted_out = std::env::var_os("ENVHOST_SKIP_PRIVILEGED").is_some_and(|v| v == "1");
    assert!(
        opted_out,
        "this test needs {what} ({why}): run the tests as root, or set ENVHOST_SKIP_PRIVILEGED=1 to skip it"
    );
    eprintln!("SKIPPED: no {what} here ({why}) and ENVHOST_SKIP_PRIVILEGED=1");
}
