//! Outgoing HTTP from plugins through the real binary, on loopback only:
//! the `fetcher` fixture (a Rust plugin using `wasi:http`) against small
//! HTTP servers these tests start on 127.0.0.1. What the operator's
//! `allowed-hosts` grants is reached; everything else is refused before
//! any connection, with a line in the response naming the grant to add;
//! a malformed grant refuses the plugin with its line and column; a
//! server that never answers, and a request body nobody reads, are cut at
//! the command's time limit while the host keeps serving; requests in
//! flight are bounded.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::harness::{Host, Project};
use crate::loopback_http::{BODY, Behaviour, Server};
use crate::plugins::{check_with_grants, install, start};

/// A project with the fetcher installed and `grants` as its
/// `env/envhost.toml` (none when empty).
fn fetcher_project(grants: &str) -> Project {
    let project = Project::new();
    install(&project, &[("fetcher", "fetcher")]);
    if !grants.is_empty() {
        project.write("env/envhost.toml", grants);
    }
    project
}

fn granted(hosts: &[String]) -> String {
    let list: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
    format!("[plugins.fetcher]\nallowed-hosts = [{}]\n", list.join(", "))
}

#[test]
fn an_allowed_host_is_reached_and_shown_as_granted() {
    let server = Server::start(Behaviour::Answer);
    let port = server.port;
    let project = fetcher_project(&granted(&[format!("http://127.0.0.1:{port}")]));
    let mut host = start(&project, &[]);

    let reply = host.command("fetcher", &format!("get http://127.0.0.1:{port}/hello"));
    let output = reply.ok();
    assert!(
        output.starts_with(&format!("status 200, {} bytes\n{BODY}", BODY.len())),
        "{output}"
    );
    assert!(!output.contains("[envhost]"), "{output}");
    // Upper case and a trailing dot name the same destination, which the
    // host writes in canonical form before connecting.
    let reply = host.command("fetcher", &format!("get HTTP://127.0.0.1:{port}/again"));
    assert!(reply.ok().starts_with("status 200"), "{}", reply.0);
    assert_eq!(
        *server.hosts.lock().expect("hosts"),
        [format!("127.0.0.1:{port}"), format!("127.0.0.1:{port}")]
    );
    // The grant, and the plugin's own request (not granted), on its screen.
    let screen = reply.screen("fetcher");
    assert!(
        screen.contains(&format!(
            "Granted by the operator: network http://127.0.0.1:{port}"
        )),
        "{screen}"
    );
    assert!(
        screen.contains(
            "Asked for but not granted (those calls fail): network https://api.github.com"
        ),
        "{screen}"
    );
    drop(host);

    // `envhost check` lists both next to the other powers.
    let grants = project.path().join("env/envhost.toml");
    let (_, report) = check_with_grants(&[fetcher_wasm(&project)], &project, Some(&grants));
    let line = |report: &str, needle: &str| {
        report
            .lines()
            .find(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle}: {report}"))
            .to_owned()
    };
    assert!(
        line(&report, &format!("network http://127.0.0.1:{port}"))
            .contains("granted (not requested)"),
        "{report}"
    );
    assert!(
        line(&report, "network https://api.github.com").contains("requested, NOT granted"),
        "{report}"
    );
    // A wildcard grant covers the request.
    let wider = project.write(
        "wider.toml",
        "[plugins.fetcher]\nallowed-hosts = [\"https://*.github.com\"]\n",
    );
    let (_, report) = check_with_grants(&[fetcher_wasm(&project)], &project, Some(&wider));
    assert!(
        line(&report, "network https://api.github.com").contains("requested, granted"),
        "{report}"
    );
}

fn fetcher_wasm(project: &Project) -> PathBuf {
    project.path().join("env/fetcher.wasm")
}

#[test]
fn without_a_grant_every_request_is_refused_with_the_grant_to_add() {
    let server = Server::start(Behaviour::Answer);
    let port = server.port;
    let project = fetcher_project("");
    let mut host = start(&project, &[]);

    let reply = host.command("fetcher", &format!("get http://127.0.0.1:{port}/"));
    assert_eq!(
        reply.failed(),
        format!(
            "request failed: ErrorCode::HttpRequestDenied\n[envhost] refused an HTTP request to http://127.0.0.1:{port} from plugin fetcher: it may send no HTTP requests; the operator can add [plugins.fetcher] with allowed-hosts = [\"http://127.0.0.1:{port}\"] to env/envhost.toml"
        )
    );
    assert_eq!(server.accepted(), 0, "nothing was connected");
    // The plugin is still the same instance: its state is kept.
    assert_eq!(host.command("fetcher", "count").ok(), "count = 1");
}

#[test]
fn other_ports_hosts_and_addresses_are_refused_before_any_connection() {
    let server = Server::start(Behaviour::Answer);
    let port = server.port;
    let project = fetcher_project(&granted(&[format!("http://127.0.0.1:{port}")]));
    let mut host = start(&project, &[]);

    let other_port = if port == 65535 { port - 1 } else { port + 1 };
    for (url, destination) in [
        // Another port of the same address.
        (
            format!("http://127.0.0.1:{other_port}/"),
            format!("http://127.0.0.1:{other_port}"),
        ),
        // Another scheme (https's default port).
        (
            format!("https://127.0.0.1:{port}/"),
            format!("https://127.0.0.1:{port}"),
        ),
        // The same machine under other names and addresses.
        (
            format!("http://localhost:{port}/"),
            format!("http://localhost:{port}"),
        ),
        (
            format!("http://127.0.0.2:{port}/"),
            format!("http://127.0.0.2:{port}"),
        ),
        (
            format!("http://[::1]:{port}/"),
            format!("http://[::1]:{port}"),
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            format!("http://[::ffff:127.0.0.1]:{port}"),
        ),
    ] {
        let reply = host.command("fetcher", &format!("get {url}"));
        let output = reply.failed();
        assert!(
            output.starts_with("request failed: ErrorCode::HttpRequestDenied\n"),
            "{url}: {output}"
        );
        assert!(
            output.contains(&format!(
                "[envhost] refused an HTTP request to {destination} from plugin fetcher: not in its allowed-hosts; the operator can add \""
            )),
            "{url}: {output}"
        );
    }
    // Forms a C resolver reads as 127.0.0.1 are refused as ambiguous.
    for numeric in ["127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1"] {
        let reply = host.command("fetcher", &format!("get http://{numeric}:{port}/"));
        let output = reply.failed();
        assert!(
            output.contains("neither a host name nor a dotted IPv4 address")
                || output.starts_with("the host would not take"),
            "{numeric}: {output}"
        );
    }
    assert_eq!(server.accepted(), 0, "nothing was connected");
    assert!(
        host.command("fetcher", &format!("get http://127.0.0.1:{port}/"))
            .ok()
            .starts_with("status 200")
    );
}

#[test]
fn a_wildcard_grant_covers_subdomains_but_not_the_apex() {
    let server = Server::start(Behaviour::Answer);
    let port = server.port;
    let project = fetcher_project(&granted(&[format!("http://*.localhost:{port}")]));
    let mut host = start(&project, &[]);

    // The apex and look-alikes are refused by the host.
    for name in ["localhost", "evillocalhost", "localhost.evil"] {
        let reply = host.command("fetcher", &format!("get http://{name}:{port}/"));
        let output = reply.failed();
        assert!(
            output.contains(&format!(
                "[envhost] refused an HTTP request to http://{name}:{port} from plugin fetcher: not in its allowed-hosts"
            )),
            "{name}: {output}"
        );
    }
    // A subdomain is allowed: reached where the resolver knows
    // `*.localhost`, and otherwise failing at name lookup, not refused.
    let reply = host.command("fetcher", &format!("get http://api.localhost:{port}/"));
    let output = reply.output();
    assert!(!output.contains("[envhost] refused"), "{output}");
    assert!(!output.contains("HttpRequestDenied"), "{output}");
    assert!(
        output.starts_with("status 200") || output.starts_with("request failed: ErrorCode::Dns"),
        "{output}"
    );
}

#[test]
fn a_malformed_grant_refuses_the_plugin_with_its_line_and_column() {
    let project = fetcher_project(
        "# the fetcher's grants\n[plugins.fetcher]\nallowed-hosts = [\"https://api.github.com\", \"127.0.0.1:8080\"]\n",
    );
    let mut host = start(&project, &[]);
    let screen = host.screen();
    let refused = screen.screen("refused-plugins");
    assert!(
        refused.contains(
            "plugin `fetcher` (env/fetcher.wasm) was refused: its entry in the plugin configuration is invalid: env/envhost.toml:3:44: [plugins.fetcher] `allowed-hosts`: \"127.0.0.1:8080\" has no scheme; write \"https://127.0.0.1:8080\" (or \"http://127.0.0.1:8080\")"
        ),
        "{refused}"
    );
}

/// The slowest a cut request may take to come back: the command's limit
/// and generous room for a loaded machine. It proves "it did not hang".
const CUT_WITHIN: Duration = Duration::from_secs(30);

#[test]
fn a_server_that_never_answers_is_cut_at_the_time_limit_and_the_host_keeps_serving() {
    let silent = Server::start(Behaviour::Silent);
    let project = fetcher_project(&granted(&[format!("http://127.0.0.1:{}", silent.port)]));
    let mut host = start(&project, &[]);

    let started = Instant::now();
    let reply = host.command_with_timeout(
        "fetcher",
        &format!("get http://127.0.0.1:{}/", silent.port),
        2_000,
    );
    assert!(
        started.elapsed() < CUT_WITHIN,
        "took {:?}",
        started.elapsed()
    );
    let output = reply.failed();
    assert!(
        output.contains("ConnectionReadTimeout") || output.contains("time limit"),
        "{output}"
    );
    assert_eq!(silent.accepted(), 1);

    // A request body written before the request is sent has no reader:
    // the write waits, and is cut at the time limit like any wait.
    let started = Instant::now();
    let reply = host.command_with_timeout(
        "fetcher",
        &format!("stall-body http://127.0.0.1:{}/", silent.port),
        2_000,
    );
    assert!(
        started.elapsed() < CUT_WITHIN,
        "took {:?}",
        started.elapsed()
    );
    assert!(reply.failed().contains("time limit"), "{}", reply.0);

    assert!(
        host.command("fetcher", "count")
            .ok()
            .starts_with("count = ")
    );
}

#[test]
fn requests_in_flight_are_bounded_per_plugin() {
    let silent = Server::start(Behaviour::Silent);
    let project = fetcher_project(&granted(&[format!("http://127.0.0.1:{}", silent.port)]));
    let mut host: Host = start(&project, &[]);

    let url = format!("http://127.0.0.1:{}/", silent.port);
    let reply = host.command("fetcher", &format!("many 20 {url}"));
    let output = reply.ok();
    assert!(
        output.starts_with("sent 8, refused 12 (ErrorCode::ConnectionLimitReached)\n"),
        "{output}"
    );
    assert!(
        output.contains(&format!(
            "[envhost] refused an HTTP request to http://127.0.0.1:{} from plugin fetcher: it already has 8 requests in flight",
            silent.port
        )),
        "{output}"
    );
    // The refused requests are told once, not twelve times.
    assert_eq!(output.matches("[envhost] refused").count(), 1, "{output}");
    // Dropped requests free their places.
    std::thread::sleep(Duration::from_millis(200));
    let reply = host.command("fetcher", &format!("many 8 {url}"));
    assert_eq!(reply.ok(), "sent 8, refused 0 ()");
    assert!(silent.accepted() <= 16, "{} connections", silent.accepted());
}
