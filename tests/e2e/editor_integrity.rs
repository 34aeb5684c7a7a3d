//! The editor never loses bytes it did not touch: a process appending to
//! the file through an open descriptor while an edit runs, a file with
//! other hard links, and `create` on a folder.

use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Host, Project, Reply};

fn editor(host: &mut Host, command: &str) -> Reply {
    host.command("editor", command)
}

const APPENDED_LINES: usize = 400;

#[test]
fn an_edit_while_another_process_appends_loses_none_of_its_lines() {
    let project = Project::new();
    let log = project.write("app.log", "header: old\n");
    let mut host = Host::start(project.path());
    editor(&mut host, "view app.log /^header/ /^header/").ok();

    // The appender keeps one descriptor open (O_APPEND) for its whole run,
    // as a logging process does, and writes a line every 5 ms.
    let script = format!(
        "import sys, time\nf = open(sys.argv[1], 'a', buffering=1)\n\
         for i in range({APPENDED_LINES}):\n    f.write('appended %d\\n' % i)\n    time.sleep(0.005)\n"
    );
    let mut appender = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .arg(&log)
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count()
        < 20
    {
        assert!(Instant::now() < deadline, "the appender never started");
        std::thread::sleep(Duration::from_millis(5));
    }

    let reply = editor(&mut host, "edit app.log 1-1\nheader: new");
    let edited = reply.success();
    let output = reply.output().to_owned();
    assert!(appender.wait().expect("appender").success());

    let content = std::fs::read_to_string(&log).expect("read app.log");
    let missing: Vec<usize> = (0..APPENDED_LINES)
        .filter(|i| !content.contains(&format!("appended {i}\n")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {APPENDED_LINES} appended lines were lost (edit succeeded: {edited}; {output})",
        missing.len()
    );
    if edited {
        assert!(content.starts_with("header: new\n"), "{content}");
    } else {
        assert!(content.starts_with("header: old\n"), "{content}");
        assert!(
            output.contains("is open for writing by another process")
                && output.contains("python3")
                && output.contains("Nothing was written"),
            "{output}"
        );
    }
}

#[test]
fn an_edit_keeps_hard_links_and_the_inode() {
    let project = Project::new();
    let original = project.write("notes.txt", "one\ntwo\nthree\n");
    let link = project.path().join("linked.txt");
    std::fs::hard_link(&original, &link).expect("hard link");
    let inode = std::fs::metadata(&original).expect("stat").ino();
    let mut host = Host::start(project.path());
    editor(&mut host, "view notes.txt /^one/ /^three/").ok();
    let output = editor(&mut host, "edit notes.txt 2-2\nTWO, edited")
        .ok()
        .to_owned();
    assert!(output.contains("Edited notes.txt lines 2-2"), "{output}");
    assert_eq!(
        std::fs::read_to_string(&link).expect("read link"),
        "one\nTWO, edited\nthree\n",
        "the other link sees the edit"
    );
    let metadata = std::fs::metadata(&original).expect("stat");
    assert_eq!(metadata.ino(), inode, "the same inode");
    assert_eq!(metadata.nlink(), 2, "both links remain");
    // A shorter edit truncates the shared inode correctly.
    editor(&mut host, "edit notes.txt 2-3\n2").ok();
    assert_eq!(std::fs::read_to_string(&link).expect("read"), "one\n2\n");
}

#[test]
fn create_on_an_existing_folder_says_it_is_a_folder() {
    let project = Project::new();
    std::fs::create_dir_all(project.path().join("src/pkg")).expect("mkdir");
    let mut host = Host::start(project.path());
    let output = editor(&mut host, "create src/pkg\nx = 1")
        .failed()
        .to_owned();
    assert!(
        output.starts_with("Cannot create src/pkg: it is a folder."),
        "{output}"
    );
    assert!(!output.contains("rm src/pkg"), "{output}");
    assert!(!output.contains("view src/pkg"), "{output}");
    assert!(
        output.contains("src/pkg/"),
        "suggests a file inside: {output}"
    );
}

#[test]
fn restart_closes_every_view_and_brings_back_the_long_help() {
    let project = Project::new();
    project.write("a.py", "def a():\n    return 1\n");
    project.write("b.py", "def b():\n    return 2\n");
    let mut host = Host::start(project.path());
    editor(&mut host, "view a.py /^def a/ /return/").ok();
    let reply = editor(&mut host, "view b.py /^def b/ /return/");
    let before = reply.screen("editor").to_owned();
    assert!(
        before.contains("  view <file> /<start>/ /<end>/ [label] - View file section"),
        "short help once used: {before}"
    );
    host.send(&serde_json::json!({"type": "restart", "environment": "editor"}));
    let reply = Reply(host.recv());
    assert_eq!(
        reply.ok(),
        "Restarted the editor: closed 2 views ([1] a.py, [2] b.py), and every command shows \
         its long help again until it is used. Files are not touched."
    );
    let screen = reply.screen("editor");
    assert!(screen.contains("(no views)"), "{screen}");
    assert!(
        screen.contains("  view <file> /<start>/ /<end>/ [label]\n    View a section"),
        "long help again: {screen}"
    );
    assert_eq!(project.read("a.py"), "def a():\n    return 1\n");
}
