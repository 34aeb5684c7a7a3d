//! The editor environment through the real binary: the worked example of
//! the design, its walk-through and error recovery, and every edge case of
//! views, edits and search.

use std::os::unix::fs::PermissionsExt;

use crate::harness::{Host, Project, Reply};

fn editor(host: &mut Host, command: &str) -> Reply {
    host.command("editor", command)
}

/// The `Views:` part of the editor's screen (everything before `Commands:`).
fn views(reply: &Reply) -> String {
    let screen = reply.screen("editor");
    let end = screen
        .find("\nCommands:\n")
        .unwrap_or_else(|| panic!("no Commands section on the editor screen:\n{screen}"));
    screen[..end].trim_end().to_owned()
}

/// The `Commands:` part of the editor's screen.
fn commands(reply: &Reply) -> String {
    let screen = reply.screen("editor");
    let start = screen
        .find("Commands:\n")
        .unwrap_or_else(|| panic!("no Commands section on the editor screen:\n{screen}"));
    screen[start..].to_owned()
}

/// A C file where `^int main\(` matches twice, at lines 45 and 120, with
/// the bodies the design's example shows.
fn seed_main_c() -> String {
    let mut lines: Vec<String> = Vec::new();
    lines.push("#include <stdio.h>".into());
    while lines.len() < 43 {
        lines.push(format!("/* helper line {} */", lines.len() + 1));
    }
    lines.push("#ifdef SMOKE_TEST".into()); // 44
    lines.push("int main() {".into()); // 45
    lines.push("    printf(\"Hello\\n\");".into()); // 46
    lines.push("    return 0;".into()); // 47
    lines.push("}".into()); // 48
    lines.push("#else".into()); // 49
    while lines.len() < 119 {
        lines.push(format!(
            "static int filler_{}(void) {{ return 0; }}",
            lines.len() + 1
        ));
    }
    lines.push("int main(int argc, char** argv) {".into()); // 120
    lines.push("    setup();".into()); // 121
    lines.push("    run();".into()); // 122
    lines.push("    return 0;".into()); // 123
    lines.push("}".into()); // 124
    lines.push("#endif".into()); // 125
    lines.join("\n") + "\n"
}

#[test]
fn the_design_example_workflow() {
    let project = Project::new();
    project.write("src/main.c", seed_main_c());
    let mut host = Host::start(project.path());

    let reply = editor(&mut host, r"view src/main.c /^int main\(/ /^}$/");
    assert_eq!(
        reply.ok(),
        r"Added view [1] src/main.c /^int main\(/ to /^}$/
The start pattern matches 2 lines; showing match 1/2 (next_match 1 shows the next)."
    );
    assert_eq!(
        views(&reply),
        r#"Views:
  [1] src/main.c /^int main\(/ to /^}$/ (match 1/2)
     45  int main() {
     46      printf("Hello\n");
     47      return 0;
     48  }"#
    );

    let reply = editor(&mut host, "next_match 1");
    assert_eq!(reply.ok(), "Showing match 2/2");
    assert_eq!(
        views(&reply),
        r"Views:
  [1] src/main.c /^int main\(/ to /^}$/ (match 2/2)
    120  int main(int argc, char** argv) {
    121      setup();
    122      run();
    123      return 0;
    124  }"
    );

    let reply = editor(&mut host, "edit src/main.c 121-121\n    initialize();");
    assert_eq!(reply.ok(), "Edited src/main.c lines 121-121");
    assert_eq!(
        views(&reply),
        r"Views:
  [1] src/main.c /^int main\(/ to /^}$/ (match 2/2)
    120  int main(int argc, char** argv) {
    121      initialize();
    122      run();
    123      return 0;
    124  }"
    );
    let on_disk = project.read("src/main.c");
    assert_eq!(on_disk.lines().nth(120), Some("    initialize();"));
    assert_eq!(on_disk.lines().count(), 125);

    // main() deleted by someone else: the view shows it is broken, once.
    let without_main: String = on_disk
        .lines()
        .filter(|line| !line.starts_with("int main"))
        .map(|line| format!("{line}\n"))
        .collect();
    project.write("src/main.c", without_main);
    let reply = host.screen();
    assert_eq!(
        views(&reply),
        "Views:\n  [1] src/main.c [BROKEN: patterns not found]"
    );
    let reply = host.screen();
    assert_eq!(views(&reply), "Views:\n  (no views)");
}

#[test]
fn walkthrough_adding_contributing_guidelines() {
    let project = Project::new();
    let mut host = Host::start(project.path());

    // Turn 1: before anything is used, every non-simple command has LONG help.
    let first = host.screen();
    let screen = first.screen("editor");
    assert!(
        screen.starts_with("Views:\n  (no views)\n\nCommands:\n  view <file> /<start>/ /<end>/ [label]\n    View a section of a file using regex patterns to define boundaries.\n"),
        "{screen}"
    );
    assert!(
        screen.contains("  create <file>\n    Create a new file with initial content.\n    Content is provided on subsequent lines after the command.\n    Example:\n      ```editor\n      create new_file.py\n      # New module\n      ```\n"),
        "{screen}"
    );
    assert!(screen.ends_with(
        "  close <id> - Close a view\n  next_match <id> - Show next pattern match for a view\n  prev_match <id> - Show previous pattern match for a view\n"
    ));

    // Turn 2: the agent creates the file from the example on screen.
    let content = "# Contributing Guidelines\n\nPlease follow these steps to contribute:\n1. Fork the repository\n2. Create a feature branch\n3. Submit a pull request";
    let reply = editor(&mut host, &format!("create CONTRIBUTING.md\n{content}"));
    assert_eq!(reply.ok(), "Created CONTRIBUTING.md");
    assert_eq!(views(&reply), "Views:\n  (no views)");
    let help = commands(&reply);
    assert!(
        help.contains("  create <file> - Create a new file with initial content\n\n  close <id> - Close a view\n"),
        "{help}"
    );
    for still_long in [
        "  view <file> /<start>/ /<end>/ [label]\n    View a section",
        "  edit <file> <start>-<end>\n    Replace lines",
        "  search \"<pattern>\" <glob>\n    Find all occurrences",
    ] {
        assert!(
            help.contains(still_long),
            "{still_long:?} missing from\n{help}"
        );
    }

    // Turn 3: the file is there, as written (with a final newline).
    assert_eq!(project.read("CONTRIBUTING.md"), format!("{content}\n"));
}

#[test]
fn help_collapses_per_command_once_used() {
    let project = Project::new();
    project.write(
        "src/main.py",
        "import sys\n\ndef main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
    );
    let mut host = Host::start(project.path());
    editor(&mut host, "view src/main.py /^def main/ /^if __name__/").ok();
    let reply = editor(&mut host, "edit src/main.py 4-4\n    print('hi')");
    reply.ok();
    let reply = editor(&mut host, "search \"TODO\" *.py");
    reply.ok();
    assert_eq!(
        commands(&reply),
        "Commands:
  view <file> /<start>/ /<end>/ [label] - View file section by regex patterns
  edit <file> <start>-<end> - Replace lines (must be visible in a view)
  search \"<pattern>\" <glob> - Find text matching pattern in files

  create <file>
    Create a new file with initial content.
    Content is provided on subsequent lines after the command.
    Example:
      ```editor
      create new_file.py
      # New module
      ```

  close <id> - Close a view
  next_match <id> - Show next pattern match for a view
  prev_match <id> - Show previous pattern match for a view
"
    );
    let reply = editor(&mut host, "frobnicate 1");
    let output = reply.failed();
    assert!(output.starts_with("Unknown command: frobnicate\nAvailable: view, edit, search, create, close, next_match, prev_match"), "{output}");
}

#[test]
fn edit_without_a_view_gives_recovery_steps() {
    let project = Project::new();
    let mut main_py = String::new();
    for n in 1..=60 {
        main_py.push_str(&format!("line_{n} = {n}\n"));
    }
    project.write("src/main.py", &main_py);
    let mut host = Host::start(project.path());
    let reply = editor(&mut host, "edit src/main.py 45-50\nnew content");
    assert_eq!(
        reply.failed(),
        r"Cannot edit - no view contains line 45

To edit a file:
  1. Create a view first: view src/main.py /^line_45 = 45/ /^line_50 = 50/
  2. See line numbers in the view on screen
  3. Edit using those lines: edit src/main.py 45-50

The view command is shown above in the Commands section."
    );
    assert_eq!(views(&reply), "Views:\n  (no views)");
    assert!(
        commands(&reply).contains("  view <file> /<start>/ /<end>/ [label]\n    View a section")
    );
    assert_eq!(
        project.read("src/main.py"),
        main_py,
        "nothing may be written"
    );

    // The suggested command works as given, and then the edit does.
    let reply = editor(
        &mut host,
        "view src/main.py /^line_45 = 45/ /^line_50 = 50/",
    );
    reply.ok();
    assert!(views(&reply).contains("     45  line_45 = 45\n"));
    editor(&mut host, "edit src/main.py 45-50\nnew content").ok();
    assert!(
        project
            .read("src/main.py")
            .contains("line_44 = 44\nnew content\nline_51 = 51\n")
    );
}

#[test]
fn deleted_file_is_shown_once_then_its_view_is_removed() {
    let project = Project::new();
    project.write("notes.md", "# Notes\n\nSome text.\n\n## End\n");
    project.write("other.md", "# Other\nbody\n## End\n");
    let mut host = Host::start(project.path());
    editor(&mut host, "view notes.md /^# Notes/ /^## End/").ok();
    editor(&mut host, "view other.md /^# Other/ /^## End/").ok();
    std::fs::remove_file(project.path().join("notes.md")).unwrap();
    let reply = host.screen();
    let shown = views(&reply);
    assert!(shown.starts_with("Views:\n  [1] notes.md [ERROR: file not found]\n\n  [2] other.md /^# Other/ to /^## End/ (match 1/1)\n"), "{shown}");
    let reply = host.screen();
    let shown = views(&reply);
    assert!(
        !shown.contains("[1]"),
        "the deleted file's view must be gone:\n{shown}"
    );
    assert!(shown.contains("[2] other.md"));
}

#[test]
fn views_reread_their_file_on_every_screen() {
    let project = Project::new();
    project.write(
        "app.py",
        "def run():\n    return 1\n\ndef other():\n    pass\n",
    );
    let mut host = Host::start(project.path());
    editor(&mut host, "view app.py /^def run/ /^def other/").ok();
    // Lines added above the function: the view follows it.
    project.write(
        "app.py",
        "import os\nimport sys\n\ndef run():\n    return 2\n\ndef other():\n    pass\n",
    );
    let reply = host.screen();
    assert_eq!(
        views(&reply),
        "Views:\n  [1] app.py /^def run/ to /^def other/ (match 1/1)\n      4  def run():\n      5      return 2\n      6\n      7  def other():"
    );
}

#[test]
fn truncation_at_1000_lines_and_big_sections_are_never_cut() {
    let project = Project::new();
    let big: String = (1..=1500).map(|n| format!("row {n}\n")).collect();
    project.write("big.txt", &big);
    let mut host = Host::start(project.path());
    let reply = editor(&mut host, "view big.txt /^row 1$/ /^no such row$/");
    let output = reply.ok();
    assert!(
        output.contains("[TRUNCATED: end pattern not found within 1000 lines]"),
        "{output}"
    );
    let shown = views(&reply);
    let mut lines = shown.lines();
    assert_eq!(lines.next(), Some("Views:"));
    assert_eq!(
        lines.next(),
        Some(
            "  [1] big.txt /^row 1$/ to /^no such row$/ (match 1/1) [TRUNCATED: end pattern not found within 1000 lines]"
        )
    );
    let numbered: Vec<&str> = lines.collect();
    assert_eq!(numbered.len(), 1000);
    assert_eq!(numbered[0], "       1  row 1");
    assert_eq!(numbered[999], "    1000  row 1000");
    // The section is sized so that the host cuts none of it.
    let content_lines = reply.screen("editor").lines().count() as u64;
    assert!(reply.max_lines("editor") >= content_lines);
    assert!(!reply.screen("editor").contains("more lines cut"));

    // An end within 1000 lines is found; one past that is not.
    let reply = editor(&mut host, "view big.txt /^row 1$/ /^row 1000$/");
    assert!(!reply.ok().contains("TRUNCATED"));
    let reply = editor(&mut host, "view big.txt /^row 1$/ /^row 1001$/");
    assert!(reply.ok().contains("TRUNCATED"));
    // The end of the file comes first: marked too.
    let reply = editor(&mut host, "view big.txt /^row 1490$/ /^nothing$/");
    assert!(views(&reply).contains("(match 1/1) [TRUNCATED: end pattern not found before the end of the file]\n    1490  row 1490"));
}

#[test]
fn a_sixth_view_closes_the_oldest_and_says_so() {
    let project = Project::new();
    for n in 1..=6 {
        project.write(&format!("f{n}.txt"), format!("start {n}\nbody\nend\n"));
    }
    let mut host = Host::start(project.path());
    for n in 1..=5 {
        editor(&mut host, &format!("view f{n}.txt /^start/ /^end/")).ok();
    }
    let reply = editor(&mut host, "view f6.txt /^start/ /^end/ sixth");
    assert_eq!(
        reply.ok(),
        "Added view [6] f6.txt /^start/ to /^end/\nClosed view [1] f1.txt /^start/ to /^end/ to make room: at most 5 views are open, and the oldest is closed first."
    );
    let shown = views(&reply);
    assert!(!shown.contains("[1] f1.txt"));
    for n in 2..=6 {
        assert!(
            shown.contains(&format!("  [{n}] f{n}.txt /^start/ to /^end/ (match 1/1)")),
            "{shown}"
        );
    }
    assert!(shown.contains("[6] f6.txt /^start/ to /^end/ (match 1/1) \"sixth\""));
}

#[test]
fn empty_binary_missing_files_and_unmatched_patterns_create_no_view() {
    let project = Project::new();
    project.write("empty.py", "");
    project.write("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    project.write("code.py", "x = 1\n");
    let mut host = Host::start(project.path());
    let output = editor(&mut host, "view empty.py /^def/ /^$/")
        .failed()
        .to_owned();
    assert!(
        output.contains("empty.py is empty, so no pattern can match and no view was created"),
        "{output}"
    );
    let output = editor(&mut host, "view image.png /PNG/ /IHDR/")
        .failed()
        .to_owned();
    assert!(output.contains("image.png is a binary file"), "{output}");
    let output = editor(&mut host, "view nowhere.py /a/ /b/")
        .failed()
        .to_owned();
    assert!(output.contains("nowhere.py: file not found"), "{output}");
    let output = editor(&mut host, "view code.py /^def main/ /^$/")
        .failed()
        .to_owned();
    assert!(
        output.contains("No line of code.py matches the start pattern /^def main/"),
        "{output}"
    );
    let output = editor(&mut host, "view code.py /(?=x)/ /y/")
        .failed()
        .to_owned();
    assert!(output.contains("look-ahead"), "{output}");
    let output = editor(&mut host, "view code.py").failed().to_owned();
    assert!(
        output.contains("expected the start pattern as /<pattern>/"),
        "{output}"
    );
    let reply = host.screen();
    assert_eq!(views(&reply), "Views:\n  (no views)");
}

#[test]
fn multiple_matches_are_navigated_with_wraparound() {
    let project = Project::new();
    project.write(
        "api.py",
        "class Base:\n    pass\n\nclass APIHandler:\n    def __init__(self):\n        self.routes = {}\n\nclass RequestParser:\n    pass\n",
    );
    let mut host = Host::start(project.path());
    let reply = editor(
        &mut host,
        r"view api.py /^class \w+/ to /^class \w+/ Classes",
    );
    reply.ok();
    assert!(views(&reply).starts_with("Views:\n  [1] api.py /^class \\w+/ to /^class \\w+/ (match 1/3) \"Classes\"\n      1  class Base:\n"));
    let reply = editor(&mut host, "next_match 1");
    assert_eq!(reply.ok(), "Showing match 2/3");
    assert_eq!(
        views(&reply),
        "Views:\n  [1] api.py /^class \\w+/ to /^class \\w+/ (match 2/3) \"Classes\"\n      4  class APIHandler:\n      5      def __init__(self):\n      6          self.routes = {}\n      7\n      8  class RequestParser:"
    );
    editor(&mut host, "next_match 1").ok();
    let reply = editor(&mut host, "next_match 1");
    assert_eq!(
        reply.ok(),
        "Showing match 1/3 (wrapped around from the last match)"
    );
    let reply = editor(&mut host, "prev_match 1");
    assert_eq!(
        reply.ok(),
        "Showing match 3/3 (wrapped around from the first match)"
    );
    assert!(views(&reply).contains("(match 3/3) \"Classes\" [TRUNCATED: end pattern not found before the end of the file]\n      8  class RequestParser:\n      9      pass"));
    let output = editor(&mut host, "next_match 9").failed().to_owned();
    assert!(
        output.contains("There is no view [9]; open views: [1] api.py"),
        "{output}"
    );
    assert_eq!(editor(&mut host, "close 1").ok(), "Closed view [1]");
    assert!(
        editor(&mut host, "close 1")
            .failed()
            .contains("There is no view [1]; no views are open")
    );
}

#[test]
fn edits_outside_views_and_on_changed_files_are_refused() {
    let project = Project::new();
    let text: String = (1..=30).map(|n| format!("line {n}\n")).collect();
    project.write("f.txt", &text);
    let mut host = Host::start(project.path());
    editor(&mut host, "view f.txt /^line 10$/ /^line 14$/").ok();

    let output = editor(&mut host, "edit f.txt 13-16\nX").failed().to_owned();
    assert!(output.starts_with("Can only edit lines visible in a view: lines 15-16 of f.txt are not shown in any view.\nView [1] shows lines 10-14 of f.txt."), "{output}");
    assert_eq!(project.read("f.txt"), text);

    // Someone changes line 12 under the view.
    let changed = text.replace("line 12\n", "line twelve\n");
    project.write("f.txt", &changed);
    let output = editor(&mut host, "edit f.txt 11-12\nA\nB")
        .failed()
        .to_owned();
    assert!(output.starts_with("Cannot edit f.txt: the file changed since the screen was shown, so line 12 is not what the view shows."), "{output}");
    assert!(output.contains("Expected (as the view showed it):\n     12  line 12   (view [1])\nActual (in the file now):\n     12  line twelve\n"), "{output}");
    assert_eq!(
        project.read("f.txt"),
        changed,
        "a refused edit writes nothing"
    );
    // That answer's screen showed the file as it is: the edit now goes through.
    editor(&mut host, "edit f.txt 11-12\nA\nB").ok();
    assert!(project.read("f.txt").contains("line 10\nA\nB\nline 13\n"));
}

#[test]
fn edited_boundary_lines_become_literal_patterns() {
    let project = Project::new();
    project.write("m.c", "int helper(void) {\n  return 1;\n}\n\nint main(int argc, char **argv) {\n  run();\n  return 0;\n}\n\nint after(void) {\n}\n");
    let mut host = Host::start(project.path());
    let reply = editor(&mut host, r"view m.c /^int main\(/ /^}$/");
    reply.ok();
    let reply = editor(&mut host, "edit m.c 5-5\nint main(void) { /* simplified */");
    assert_eq!(
        reply.ok(),
        r"Edited m.c lines 5-5
View [1]: its start line was edited, so its start pattern is now /^int main\(void\) \{ \/\* simplified \*\/$/"
    );
    assert_eq!(
        views(&reply),
        r"Views:
  [1] m.c /^int main\(void\) \{ \/\* simplified \*\/$/ to /^}$/ (match 1/1)
      5  int main(void) { /* simplified */
      6    run();
      7    return 0;
      8  }"
    );
    // Replacing the closing line with two lines: the end pattern follows
    // the last of them, and the view keeps showing them.
    let reply = editor(&mut host, "edit m.c 7-8\n  return 0;\n} // main");
    let output = reply.ok();
    assert!(
        output.contains(
            r"View [1]: its end line was edited, so its end pattern is now /^\} \/\/ main$/"
        ),
        "{output}"
    );
    assert!(
        views(&reply).ends_with("      7    return 0;\n      8  } // main"),
        "{}",
        views(&reply)
    );
    // The view's header can be typed back in as a view command.
    let header = views(&reply).lines().nth(1).unwrap().to_owned();
    let command = header
        .trim_start_matches("  [1] ")
        .split(" (match")
        .next()
        .unwrap()
        .replace(" to ", " ");
    editor(&mut host, &format!("view {command}")).ok();
}

#[test]
fn edits_keep_line_endings_final_newline_bytes_and_permissions() {
    let project = Project::new();
    project.write("crlf.txt", "one\r\ntwo\r\nthree\r\n");
    project.write("nofinal.txt", "alpha\nbeta\ngamma");
    project.write("latin1.txt", b"caf\xe9 = 1\nname = 'x'\nend\n");
    let script = project.write("run.sh", "#!/bin/sh\necho old\n# end\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o754)).unwrap();
    let mut host = Host::start(project.path());

    editor(&mut host, "view crlf.txt /^one$/ /^three$/").ok();
    editor(&mut host, "edit crlf.txt 2-2\nTWO\nTWO AND A HALF").ok();
    assert_eq!(
        std::fs::read(project.path().join("crlf.txt")).unwrap(),
        b"one\r\nTWO\r\nTWO AND A HALF\r\nthree\r\n"
    );

    editor(&mut host, "view nofinal.txt /^alpha/ /^gamma/").ok();
    editor(&mut host, "edit nofinal.txt 3-3\nGAMMA\nDELTA").ok();
    assert_eq!(project.read("nofinal.txt"), "alpha\nbeta\nGAMMA\nDELTA");

    let reply = editor(&mut host, "view latin1.txt /^caf/ /^end/");
    reply.ok();
    assert!(
        views(&reply).contains("      1  caf\u{fffd} = 1\n"),
        "{}",
        views(&reply)
    );
    editor(&mut host, "edit latin1.txt 2-2\nname = 'y'").ok();
    assert_eq!(
        std::fs::read(project.path().join("latin1.txt")).unwrap(),
        b"caf\xe9 = 1\nname = 'y'\nend\n"
    );

    editor(&mut host, "view run.sh /^#!/ /^# end/").ok();
    editor(&mut host, "edit run.sh 2-2\necho new").ok();
    assert_eq!(project.read("run.sh"), "#!/bin/sh\necho new\n# end\n");
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o754);

    // Through a symlink: the target changes, the link stays a link.
    std::os::unix::fs::symlink("crlf.txt", project.path().join("link.txt")).unwrap();
    editor(&mut host, "view link.txt /^one$/ /^three$/").ok();
    editor(&mut host, "edit link.txt 1-1\nONE").ok();
    assert!(
        std::fs::symlink_metadata(project.path().join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(project.read("crlf.txt").starts_with("ONE\r\nTWO\r\n"));

    // Deleting lines: an edit with no content lines.
    editor(&mut host, "edit run.sh 2-2\n").ok();
    assert_eq!(project.read("run.sh"), "#!/bin/sh\n# end\n");

    // No temporary file is left beside the edited files.
    let leftovers: Vec<_> = std::fs::read_dir(project.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".envhost-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn python_style_patterns_work() {
    let project = Project::new();
    project.write("main.c", "int main() {\n  int x = 42;\n  return x;\n}\n");
    project.write("data.txt", "id: abc\nid: 123\nvalue: 7\nend\n");
    let mut host = Host::start(project.path());
    // A literal `{` (Python reads it as a literal; so do we).
    let reply = editor(&mut host, r"view main.c /^int main\(\) {/ /^}$/");
    reply.ok();
    assert!(
        views(&reply).contains("(match 1/1)\n      1  int main() {\n"),
        "{}",
        views(&reply)
    );
    // \d, \w, \s, and $ at each line's end.
    let reply = editor(&mut host, r"view data.txt /^id:\s\d+$/ /^\w+$/");
    reply.ok();
    assert!(
        views(&reply).contains("(match 1/1)\n      2  id: 123\n      3  value: 7\n      4  end"),
        "{}",
        views(&reply)
    );
    // \A and \z: the first and last line of the file.
    let reply = editor(&mut host, r"view data.txt /\A/ /\Z/ whole file");
    reply.ok();
    assert!(views(&reply).contains("(match 1/1) \"whole file\"\n      1  id: abc\n      2  id: 123\n      3  value: 7\n      4  end"), "{}", views(&reply));
    let output = editor(&mut host, r"view data.txt /(\w)\1/ /x/")
        .failed()
        .to_owned();
    assert!(output.contains("back-references"), "{output}");
}

#[test]
fn paths_outside_the_project_are_refused_unless_allowed() {
    let outside = Project::new();
    outside.write("secret.txt", "top secret\nmore\n");
    let project = Project::new();
    let outside_file = outside.canonical().join("secret.txt");
    std::os::unix::fs::symlink(outside.canonical(), project.path().join("escape")).unwrap();
    let relative_escape = format!(
        "../{}/secret.txt",
        outside.canonical().file_name().unwrap().to_string_lossy()
    );
    let mut host = Host::start(project.path());
    let output = editor(&mut host, &format!("view {relative_escape} /top/ /more/"))
        .failed()
        .to_owned();
    assert!(
        output.contains("leads outside the project") && output.contains("--allow-outside-project"),
        "{output}"
    );
    let output = editor(
        &mut host,
        &format!("view {} /top/ /more/", outside_file.display()),
    )
    .failed()
    .to_owned();
    assert!(
        output.contains("is an absolute path outside the project"),
        "{output}"
    );
    let output = editor(&mut host, "view escape/secret.txt /top/ /more/")
        .failed()
        .to_owned();
    assert!(
        output.contains("goes through a symlink to") && output.contains("outside the project"),
        "{output}"
    );
    let output = editor(&mut host, "create escape/new.txt\nx")
        .failed()
        .to_owned();
    assert!(output.contains("outside the project"), "{output}");
    assert!(!outside.path().join("new.txt").exists());
    drop(host);

    let mut host = Host::builder()
        .arg("--allow-outside-project")
        .start(project.path());
    let reply = editor(&mut host, "view escape/secret.txt /top/ /more/");
    reply.ok();
    assert!(
        views(&reply).contains("      1  top secret\n"),
        "{}",
        views(&reply)
    );
}

#[test]
fn create_makes_parents_and_never_overwrites() {
    let project = Project::new();
    project.write("existing.py", "keep = True\n");
    let mut host = Host::start(project.path());
    let reply = editor(
        &mut host,
        "create src/pkg/new_module.py\n# New module\n\ndef f():\n    return 1\n",
    );
    assert_eq!(reply.ok(), "Created src/pkg/new_module.py");
    assert_eq!(
        project.read("src/pkg/new_module.py"),
        "# New module\n\ndef f():\n    return 1\n"
    );
    let output = editor(&mut host, "create existing.py\nclobbered = True")
        .failed()
        .to_owned();
    assert!(
        output.starts_with(
            "Cannot create existing.py: it already exists, and create never overwrites a file."
        ),
        "{output}"
    );
    assert!(
        output.contains("view existing.py /<start>/ /<end>/"),
        "{output}"
    );
    assert_eq!(project.read("existing.py"), "keep = True\n");
    editor(&mut host, "create empty.txt").ok();
    assert_eq!(project.read("empty.txt"), "");
}

#[test]
fn search_lists_matches_skips_what_it_should_and_caps() {
    let project = Project::new();
    project.write("src/app.py", "# TODO: first\nx = 1\n# todo lower\n");
    project.write("src/lib/util.py", "def f():\n    pass  # TODO: second\n");
    project.write("README.md", "TODO in markdown\n");
    project.write(".gitignore", "build/\n*.log\n");
    project.write("build/out.py", "# TODO: built\n");
    project.write("debug.log", "TODO in a log\n");
    project.write(".git/config", "TODO inside git\n");
    project.write("node_modules/pkg/index.py", "# TODO dependency\n");
    project.write("blob.py", b"# TODO\0binary\n");
    let mut host = Host::start(project.path());

    let reply = editor(&mut host, "search \"TODO\" *.py");
    assert_eq!(
        reply.ok(),
        "Matches:\n  src/app.py:1: # TODO: first\n  src/lib/util.py:2:     pass  # TODO: second\n(skipped 1 binary file)"
    );
    let reply = editor(&mut host, "search \"(?i)todo\" src/*.py");
    assert_eq!(
        reply.ok(),
        "Matches:\n  src/app.py:1: # TODO: first\n  src/app.py:3: # todo lower"
    );
    let reply = editor(&mut host, "search \"TODO\" src");
    assert!(reply.ok().contains("src/lib/util.py:2:"));
    let reply = editor(&mut host, "search \"TODO\"");
    let output = reply.ok();
    assert!(
        output.contains("  README.md:1: TODO in markdown\n"),
        "{output}"
    );
    for skipped in ["build/", "debug.log", ".git/", "node_modules/"] {
        assert!(
            !output.contains(skipped),
            "{skipped} must be skipped:\n{output}"
        );
    }
    let reply = editor(&mut host, "search \"nothing here\" *.py");
    assert!(
        reply
            .ok()
            .starts_with("No matches for /nothing here/ in files matching *.py")
    );
    let reply = editor(&mut host, "search \"x\" *.rs");
    assert!(reply.failed().starts_with("No files match *.rs."));

    let many: String = (1..=250).map(|n| format!("hit {n}\n")).collect();
    project.write("many.txt", many);
    let reply = editor(&mut host, "search \"^hit\" *.txt");
    let output = reply.ok();
    assert_eq!(
        output
            .lines()
            .filter(|l| l.starts_with("  many.txt:"))
            .count(),
        100
    );
    assert!(output.ends_with("... and 150 more matches (250 matches in 1 file in all); narrow the pattern or the glob to see them."), "{output}");
}
