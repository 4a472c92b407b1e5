//! The flag reference of `docs/operations.md`, checked against the programs' clap definitions:
//! each program (and each of its subcommands) has a table between the lines
//! `<!-- BEGIN FLAGS <program> -->` and `<!-- END FLAGS <program> -->`, one row per flag in the
//! order `--help` lists them. A flag added, removed or changed in the code without the docs
//! fails [`check`]; with `UPDATE_FLAG_DOCS=1` it rewrites the tables in place instead (and adds
//! those missing at the end of the file).

use std::path::{Path, PathBuf};

use clap::Command;

/// The variable that makes [`check`] rewrite the tables instead of comparing them.
pub const UPDATE_VAR: &str = "UPDATE_FLAG_DOCS";

/// The document holding the flag reference.
pub fn operations_md() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md")
}

/// The tables of `program` and of its subcommands (named `program subcommand`), in order.
pub fn tables(program: &str, command: &Command) -> Vec<(String, String)> {
    let mut out = vec![(program.to_owned(), table(command))];
    for sub in command.get_subcommands() {
        if sub.get_name() != "help" {
            out.extend(tables(&format!("{program} {}", sub.get_name()), sub));
        }
    }
    out
}

/// `| flag | environment variable | default | meaning |`, a row per long flag of `command`, as
/// `--help` orders them: flags without a heading first, then each heading's in turn.
pub fn table(command: &Command) -> String {
    let flags: Vec<_> = command
        .get_arguments()
        .filter(|a| a.get_long().is_some() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    let mut headings: Vec<Option<&str>> = vec![None];
    for flag in &flags {
        if !headings.contains(&flag.get_help_heading()) {
            headings.push(flag.get_help_heading());
        }
    }
    let mut text =
        String::from("| flag | environment variable | default | meaning |\n|---|---|---|---|\n");
    for heading in headings {
        for flag in flags.iter().filter(|f| f.get_help_heading() == heading) {
            let env = flag
                .get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default();
            let defaults: Vec<String> = flag
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let default = match defaults.join(",").as_str() {
                "" => String::new(),
                d => format!("`{d}`"),
            };
            let meaning = flag
                .get_help()
                .map(|h| h.to_string())
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace('|', "\\|");
            let long = flag.get_long().unwrap_or_default();
            text.push_str(&format!("| `--{long}` | {env} | {default} | {meaning} |\n"));
        }
    }
    text
}

/// Compares each `(program, table)` with its block in `doc` (or, with [`UPDATE_VAR`] set,
/// rewrites the blocks). Panics naming every program whose table differs or is missing.
pub fn check(doc: &Path, tables: &[(String, String)]) {
    let update = std::env::var_os(UPDATE_VAR).is_some_and(|v| !v.is_empty());
    let mut text = std::fs::read_to_string(doc).unwrap_or_default();
    let mut stale = Vec::new();
    for (program, table) in tables {
        let begin = format!("<!-- BEGIN FLAGS {program} -->\n");
        let end = format!("<!-- END FLAGS {program} -->");
        let block = match text.find(&begin) {
            Some(start) => {
                let from = start + begin.len();
                text[from..].find(&end).map(|len| from..from + len)
            }
            None => None,
        };
        match block {
            Some(range) if text[range.clone()] == **table => {}
            Some(range) if update => text.replace_range(range, table),
            None if update => {
                if !text.is_empty() && !text.ends_with("\n\n") {
                    text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
                }
                text.push_str(&format!("### `{program}`\n\n{begin}{table}{end}\n"));
            }
            Some(_) => stale.push(format!("{program}: the table differs")),
            None => stale.push(format!("{program}: no block")),
        }
    }
    if update {
        std::fs::write(doc, text).unwrap();
        return;
    }
    assert!(
        stale.is_empty(),
        "{} is out of date with the flags ({}); run the test again with {UPDATE_VAR}=1 to \
         rewrite its tables",
        doc.display(),
        stale.join("; ")
    );
}
