//! `runner-client completions SHELL` loaded into the real shell: a subcommand and a flag of a
//! subcommand complete. bash runs everywhere; zsh and fish (Debian packages of those names) run
//! in ignored tests, which `.ci/run` runs after installing them.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// The script `runner-client completions shell` prints, in a file of `dir`.
fn script(shell: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_runner-client"))
        .args(["completions", shell])
        .output()
        .expect("runner-client runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(format!("runner-client.{shell}"));
    std::fs::write(&path, out.stdout).expect("writes the script");
    path
}

/// What `shell -c code` prints, one completion a line.
fn run(shell: &str, code: &str) -> Vec<String> {
    let out = Command::new(shell)
        .args(["-c", code])
        .output()
        .unwrap_or_else(|e| panic!("{shell} runs (apt-get install {shell}): {e}"));
    assert!(
        out.status.success(),
        "{shell}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        // fish prints "candidate<TAB>description".
        .map(|line| line.split('\t').next().unwrap_or_default().to_owned())
        .collect()
}

/// bash's completions of the words of `line` (the last one being completed), as bash computes
/// them when Tab is pressed: the completion function is called with COMP_WORDS set.
fn bash(script: &std::path::Path, line: &[&str]) -> Vec<String> {
    let words = line
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let current = line.len() - 1;
    let previous = line[current.saturating_sub(1)];
    let code = format!(
        "source '{}'; COMP_WORDS=({words}); COMP_CWORD={current}; COMP_LINE='{}'; \
         COMP_POINT=${{#COMP_LINE}}; _runner__client runner-client '{}' '{previous}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        line.join(" "),
        line[current],
    );
    let mut completions = run("bash", &code);
    // The script asks bash not to sort (`-o nosort`): the order is clap's.
    completions.sort();
    completions
}

#[test]
fn bash_completes_subcommands_and_their_flags() {
    let dir = tempfile::TempDir::new().unwrap();
    let script = script("bash", dir.path());
    assert_eq!(bash(&script, &["runner-client", "mem"]), ["memory"]);
    assert_eq!(
        bash(&script, &["runner-client", "memory", "se"]),
        ["search"]
    );
    assert_eq!(
        bash(&script, &["runner-client", "memory", "search", "--mo"]),
        ["--mode"]
    );
    assert_eq!(
        bash(
            &script,
            &["runner-client", "memory", "search", "--mode", "sem"]
        ),
        ["semantic"]
    );
    assert_eq!(
        bash(&script, &["runner-client", "memory", "add-session", "--se"]),
        ["--session", "--session-endpoint"]
    );
}

#[test]
#[ignore = "needs fish (apt-get install fish); .ci/run runs it"]
fn fish_completes_subcommands_and_their_flags() {
    let dir = tempfile::TempDir::new().unwrap();
    let script = script("fish", dir.path());
    let complete = |line: &str| {
        run(
            "fish",
            &format!("source '{}'; complete -C '{line}'", script.display()),
        )
    };
    assert_eq!(complete("runner-client memory se"), ["search"]);
    assert_eq!(complete("runner-client memory search --mo"), ["--mode"]);
    assert_eq!(
        complete("runner-client memory search --mode sem"),
        ["semantic"]
    );
}

/// zsh completes as it does for a person: an interactive zsh on a pseudo-terminal (zsh's own
/// `zpty`) is typed `runner-client memory se<Tab>--mo<Tab>sem<Tab><Enter>`, and the command it
/// then runs (a function printing its arguments) shows what the Tabs inserted.
#[test]
#[ignore = "needs zsh (apt-get install zsh); .ci/run runs it"]
fn zsh_completes_subcommands_and_their_flags() {
    let dir = tempfile::TempDir::new().unwrap();
    // zsh finds completion functions by file name (`_runner-client`) in $fpath.
    std::fs::rename(script("zsh", dir.path()), dir.path().join("_runner-client")).unwrap();
    let driver = format!(
        r#"zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z "fpath=('{dir}' \$fpath); autoload -Uz compinit; compinit -u -D; runner-client() {{ print -r -- \"ARGS<\$*>\" }}"
zpty -w -n z $'runner-client memory se\t--mo\tsem\t\n'
zpty -r z out '*ARGS<memory*>*'
print -r -- "$out" | grep -a -o 'ARGS<memory[^>]*>' | tail -n 1
zpty -d z
"#,
        dir = dir.path().display()
    );
    let mut child = Command::new("zsh")
        .args(["-f", "-c", &driver])
        .stdout(Stdio::piped())
        .spawn()
        .expect("zsh runs (apt-get install zsh)");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("zsh did not run the completed command within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ARGS<memory search --mode=semantic>"
    );
}
