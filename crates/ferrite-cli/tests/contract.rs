//! The documented command lines work: every line of README.md's `ferrite` command block and
//! every example of `ferrite bench --help` runs (at tiny sizes, its data in a temporary
//! directory) with the documented exit status, and each benchmark's last line is a `result …`
//! line carrying the fields its help documents (and those README.md names). Also: every
//! command's `--help` exits 0, a typo gets a suggestion and exit status 2, and the completion
//! scripts print.

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferrite")).args(args).output().expect("running ferrite")
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn describe(args: &[String], o: &Output) -> String {
    format!(
        "ferrite {}\nstatus: {:?}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[track_caller]
fn expect(status: i32, args: &[String]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(status), "{}", describe(args, &o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The command lines of README.md's `ferrite` command block: (line, trailing comment).
fn readme_lines() -> Vec<(String, String)> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(&readme).expect("reading README.md");
    let start = text.find("## The `ferrite` command").expect("README.md has the command section");
    let block = &text[start..];
    let block = &block[block.find("```sh\n").expect("a sh block") + 6..];
    let block = &block[..block.find("```").expect("the block ends")];
    block
        .lines()
        .filter(|l| l.starts_with("ferrite "))
        .map(|l| match l.split_once('#') {
            Some((line, comment)) => (line.trim().to_owned(), comment.trim().to_owned()),
            None => (l.trim().to_owned(), String::new()),
        })
        .collect()
}

/// The fields README.md says a `result` line carries, by its first field (`lookups_per_s`,
/// `iops`).
fn readme_result_fields() -> Vec<Vec<String>> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(readme).expect("reading README.md");
    text.split("`result ")
        .skip(1)
        .map(|rest| {
            let line = &rest[..rest.find('`').unwrap_or(rest.len())];
            line.split_whitespace()
                .filter_map(|w| w.split_once('=').map(|(name, _)| name.to_owned()))
                .collect()
        })
        .collect()
}

/// The file a documented line's PATH stands for (`--value-file PATH`, `--output PATH`):
/// created by [`readme_command_block_runs`] before the lines run.
const PATH_FILE: &str = "value-file";

/// A documented line made runnable: placeholders filled in, optional parts taken, the first
/// of alternatives chosen, sizes made tiny and data put under `tmp`.
fn runnable(line: &str, tmp: &Path) -> Vec<String> {
    let path = |name: &str| tmp.join(name).to_str().unwrap().to_owned();
    let cleaned: String = line.chars().filter(|c| !matches!(c, '[' | ']')).collect();
    let mut words: Vec<String> = cleaned
        .split_whitespace()
        .skip(1) // "ferrite"
        .filter(|w| *w != "…")
        .map(|w| {
            let w = w.split('|').next().unwrap_or(w);
            match w {
                "T" => "t".to_owned(),
                "K" | "KEY" => "k".to_owned(),
                "VALUE" => "v".to_owned(),
                "N" => "10".to_owned(),
                "PATH" => path(PATH_FILE),
                "TARGET" => path("backup"),
                _ => w.to_owned(),
            }
        })
        .collect();
    let bench = words.first().map(String::as_str) == Some("bench");
    let workload = if bench { words.get(1).cloned().unwrap_or_default() } else { String::new() };
    let store = value_of(&words, "--store");
    let peer = store.as_deref().is_some_and(|s| s != "ferrite");
    // The options to set (replacing what the line says), by command.
    let mut set: Vec<(&str, Option<String>)> = Vec::new();
    let takes_db = !matches!(words.first().map(String::as_str), Some("completions" | "help"));
    if !bench {
        if takes_db {
            set.push(("--db", Some(path("data"))));
        }
    } else {
        match workload.as_str() {
            "lookup" if !peer => set.extend([
                ("--db", Some(path("lookup"))),
                ("--keys", Some("2k".into())),
                ("--pool-mib", Some("1".into())),
                ("--seconds", Some("0.3".into())),
                ("--workers", Some("1".into())),
                ("--tasks", Some("4".into())),
                ("--engine", Some("io_uring".into())),
            ]),
            "io" => set.extend([
                ("--file", Some(path("io.dat"))),
                ("--size-mib", Some("8".into())),
                ("--seconds", Some("0.3".into())),
                ("--depth", Some("4".into())),
            ]),
            "recovery" => set.extend([
                ("--db", Some(path("recovery"))),
                ("--seconds", Some("0.2,0.3".into())),
                ("--committers", Some("2".into())),
                ("--workers", Some("1".into())),
            ]),
            "tpcc" => set.extend([
                ("--db", Some(path("tpcc"))),
                ("--reduced-scale", None),
                ("--warehouses", Some("1".into())),
                ("--terminals-per-warehouse", Some("2".into())),
                ("--cache-mib", Some("16".into())),
                ("--seconds", Some("0.3".into())),
                ("--workers", Some("1".into())),
            ]),
            "compare" => set.extend([
                ("--db", Some(path("compare"))),
                ("--out", Some(path("compare-out"))),
                ("--stores", Some("ferrite".into())),
                ("--records", Some("2k".into())),
                ("--cache-mib", Some("1".into())),
                ("--seconds", Some("0.2".into())),
                ("--rounds", Some("1".into())),
                ("--no-ceiling", None),
            ]),
            _ => set.extend([
                ("--db", Some(path(&format!("{workload}-{}", store.as_deref().unwrap_or("f"))))),
                ("--records", Some("2k".into())),
                ("--cache-mib", Some("1".into())),
                ("--seconds", Some("0.3".into())),
                ("--no-ceiling", None),
            ]),
        }
        if workload.starts_with("fill") && words.iter().any(|w| w == "--committers") {
            set.push(("--committers", Some("4".into())));
        }
    }
    for (name, value) in set {
        // The same option under another name (`--records` for `--keys`) goes first.
        let aliases = match name {
            "--keys" | "--records" => vec!["--keys", "--records"],
            "--pool-mib" | "--cache-mib" => vec!["--pool-mib", "--cache-mib"],
            other => vec![other],
        };
        let mut i = 0;
        while i < words.len() {
            if aliases.contains(&words[i].as_str()) {
                let takes_value = i + 1 < words.len() && !words[i + 1].starts_with("--");
                words.drain(i..if takes_value { i + 2 } else { i + 1 });
            } else {
                i += 1;
            }
        }
        words.push(name.to_owned());
        words.extend(value);
    }
    words
}

fn value_of(words: &[String], name: &str) -> Option<String> {
    let i = words.iter().position(|w| w == name)?;
    words.get(i + 1).filter(|v| !v.starts_with("--")).cloned()
}

/// The fields a `result` template of a help text documents (outside brackets: always there).
fn documented_fields(help: &str) -> Vec<String> {
    let mut lines = help.lines().skip_while(|l| !l.trim_start().starts_with("result "));
    let Some(first) = lines.next() else { return Vec::new() };
    let mut template = first.trim().to_owned();
    for line in lines.take_while(|l| l.starts_with("           ")) {
        template.push(' ');
        template.push_str(line.trim());
    }
    let mut depth = 0;
    let mut outside = String::new();
    for c in template.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if depth == 0 => outside.push(c),
            _ => {}
        }
    }
    outside
        .split_whitespace()
        .filter_map(|w| w.split_once('=').map(|(name, _)| name.to_owned()))
        .collect()
}

/// Checks a benchmark's output: the last line is `result …` with `fields`.
#[track_caller]
fn check_result(args: &[String], out: &str, fields: &[String]) {
    let last = out.lines().last().unwrap_or("");
    assert!(last.starts_with("result "), "ferrite {}: last line {last:?}", args.join(" "));
    let present: Vec<&str> =
        last.split_whitespace().skip(1).filter_map(|w| w.split_once('=')).map(|(n, _)| n).collect();
    for field in fields {
        assert!(present.contains(&field.as_str()), "{field} missing in {last:?}");
    }
}

/// The help that documents the result line of `args` (a bench command line).
fn result_help(args: &[String]) -> String {
    let workload = args[1].as_str();
    let peer = value_of(args, "--store").is_some_and(|s| s != "ferrite");
    let documented_by = if workload == "lookup" && peer { "ycsb-a" } else { workload };
    expect(0, &strings(&["bench", documented_by, "--help"]))
}

/// Whether `store` is built into this binary (the peers need the `peers` feature).
fn built_in(store: &str) -> bool {
    store == "ferrite" || cfg!(feature = "peers")
}

#[test]
fn readme_command_block_runs() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join(PATH_FILE), "a value read from a file").unwrap();
    let lines = readme_lines();
    assert!(lines.len() >= 11, "{lines:?}");
    let readme_fields = readme_result_fields();
    for (line, comment) in &lines {
        let args = runnable(line, tmp.path());
        let mut runs = vec![args.clone()];
        // `--store A|B|C`: every store the line lists that is built in.
        if line.contains("--store ferrite|") {
            let listed = line.split("--store ").nth(1).unwrap_or("");
            let listed = listed.split([' ', ']']).next().unwrap_or("");
            for peer in listed.split('|').skip(1).filter(|s| built_in(s)) {
                let i = args.iter().position(|a| a == "--store").unwrap();
                let mut other = args.clone();
                other[i + 1] = peer.to_owned();
                let db = other.iter().position(|a| a == "--db").unwrap();
                other[db + 1] = tmp.path().join(format!("peer-{peer}")).display().to_string();
                // Ferrite's own options are refused for a peer: leave them out.
                for ferrite_only in ["--engine", "--workers", "--tasks"] {
                    if let Some(i) = other.iter().position(|a| a == ferrite_only) {
                        other.drain(i..i + 2);
                    }
                }
                runs.push(other);
            }
        }
        for args in runs {
            let out = expect(0, &args);
            if args[0] == "bench" {
                let help = result_help(&args);
                check_result(&args, &out, &documented_fields(&help));
                let first = out.lines().last().unwrap().split_whitespace().nth(1).unwrap_or("");
                let first = first.split('=').next().unwrap_or("");
                for fields in
                    readme_fields.iter().filter(|f| f.first().map(String::as_str) == Some(first))
                {
                    check_result(&args, &out, fields);
                }
            }
        }
        // "exit 1 if absent": the key is gone after `del`.
        if comment.contains("exit 1 if absent") && line.starts_with("ferrite del") {
            expect(1, &args);
            let mut get = args.clone();
            get[0] = "get".to_owned();
            expect(1, &get);
        }
    }
}

#[test]
fn bench_help_examples_run() {
    let tmp = tempfile::tempdir().unwrap();
    let help = expect(0, &strings(&["bench", "--help"]));
    let examples: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "EXAMPLES")
        .skip(1)
        .map(str::trim)
        .filter(|l| l.starts_with("ferrite bench "))
        .collect();
    assert!(examples.len() >= 5, "{help}");
    for example in examples {
        let args = runnable(example, tmp.path());
        if value_of(&args, "--store").is_some_and(|s| !built_in(&s)) {
            continue;
        }
        let out = expect(0, &args);
        check_result(&args, &out, &documented_fields(&result_help(&args)));
    }
}

/// The subcommands a help text lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // (A description that wraps continues further in.)
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_help_exits_0_and_names_its_options() {
    let top = expect(0, &strings(&["--help"]));
    assert_eq!(expect(0, &strings(&["help"])), top);
    let mut paths: Vec<Vec<String>> = Vec::new();
    for command in subcommands(&top) {
        let help = expect(0, &[command.clone(), "--help".into()]);
        for workload in subcommands(&help) {
            paths.push(vec![command.clone(), workload]);
        }
        paths.push(vec![command]);
    }
    assert!(paths.len() > 20, "{paths:?}");
    for path in paths {
        let mut args = path.clone();
        args.push("--help".into());
        let long = expect(0, &args);
        args.pop();
        args.push("-h".into());
        let short = expect(0, &args);
        let mut help_cmd = vec!["help".to_owned()];
        help_cmd.extend(path.iter().cloned());
        assert_eq!(expect(0, &help_cmd), long, "ferrite help {}", path.join(" "));
        // Every option the short help lists is explained in the long one.
        for word in short.split_whitespace().filter(|w| w.starts_with("--")) {
            let option = word.trim_end_matches(|c: char| !c.is_alphanumeric());
            assert!(long.contains(option), "{path:?}: {option} not in\n{long}");
        }
        assert!(long.contains(&format!("Usage: ferrite {}", path.join(" "))), "{long}");
    }
}

#[test]
fn a_typo_gets_a_suggestion_and_exit_status_2() {
    for (args, suggestion) in [
        (vec!["bnech"], "'bench'"),
        (vec!["bench", "lookpu"], "'lookup'"),
        (vec!["get", "--db", "d", "--tre", "t", "k"], "'--tree'"),
    ] {
        let args = strings(&args);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", describe(&args, &o));
        assert!(o.stdout.is_empty(), "{}", describe(&args, &o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("ferrite: ") && err.contains(suggestion),
            "{}",
            describe(&args, &o)
        );
    }
}

#[test]
fn completions_print_a_script() {
    for shell in ["bash", "zsh", "fish"] {
        let out = expect(0, &strings(&["completions", shell]));
        assert!(out.contains("ferrite") && out.contains("lookup"), "{shell}: {out}");
    }
    expect(2, &strings(&["completions", "tcsh"]));
}

#[test]
fn version() {
    let expected = format!("ferrite {}\n", env!("CARGO_PKG_VERSION"));
    assert_eq!(expect(0, &strings(&["--version"])), expected);
    assert_eq!(expect(0, &strings(&["-V"])), expected);
    assert_eq!(expect(0, &strings(&["version"])), expected);
}
