//! The documentation says only what the binary does: every `abide` command line in a shell
//! block of README.md or docs/*.md names a subcommand that exists and flags that its
//! `--help` lists, and every relative link points to a file (and heading) that exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every docs/*.md, in a stable order.
fn doc_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("readable docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    chapters.sort();
    files.extend(chapters);
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn name(path: &Path) -> String {
    let root = repo_root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The logical lines (backslash continuations joined) of every ```sh, ```bash, ```shell
/// and ```console block, with the 1-based number of their first line.
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<bool> = None; // Some(is_shell) inside a fence
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            fence = match fence {
                None => Some(matches!(lang.trim(), "sh" | "bash" | "shell" | "console")),
                Some(_) => None,
            };
            pending = None;
            continue;
        }
        if fence != Some(true) {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        match line.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                pending = Some((start, joined));
            }
            None => {
                joined.push_str(line);
                out.push((start, joined));
            }
        }
    }
    out
}

/// One shell line cut into simple commands at `|`, `;` and `&` outside quotes, a `#`
/// comment (after a blank, outside quotes) dropped. Each command is its list of words,
/// quotes removed.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut cmds = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None => match c {
                '\'' | '"' => quote = Some(c),
                '#' if prev.is_whitespace() && word.is_empty() => break,
                '|' | ';' | '&' => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    if !words.is_empty() {
                        cmds.push(std::mem::take(&mut words));
                    }
                }
                c if c.is_whitespace() => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            },
        }
        prev = c;
    }
    if !word.is_empty() {
        words.push(word);
    }
    if !words.is_empty() {
        cmds.push(words);
    }
    cmds
}

/// The arguments after `abide` (or `cargo run [--release] -p abide --`), if this command
/// runs abide; leading `VAR=value` assignments, a `$` prompt and `do`/`then` are skipped.
fn abide_args(words: &[String]) -> Option<&[String]> {
    let mut w = words;
    while let Some(first) = w.first() {
        let assignment = first.split_once('=').is_some_and(|(var, _)| {
            !var.is_empty() && var.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        });
        if assignment || matches!(first.as_str(), "$" | "do" | "then") {
            w = &w[1..];
        } else {
            break;
        }
    }
    let as_str: Vec<&str> = w.iter().map(String::as_str).collect();
    for prefix in [
        &["abide"][..],
        &["cargo", "run", "-p", "abide", "--"][..],
        &["cargo", "run", "--release", "-p", "abide", "--"][..],
    ] {
        if as_str.starts_with(prefix) {
            return Some(&w[prefix.len()..]);
        }
    }
    None
}

/// `--flag` in a word, without `=value` and the brackets of a usage synopsis.
fn flag(word: &str) -> Option<String> {
    let w = word.trim_start_matches('[').trim_end_matches("...");
    let w = w.trim_end_matches(']');
    let f = w.split('=').next().unwrap_or(w);
    (f.starts_with("--") && f.len() > 2).then(|| f.to_owned())
}

/// True when `help` lists `flag` as a whole word (not as the prefix of a longer flag).
fn lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        let next = help[i + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

struct Help {
    cache: BTreeMap<String, Option<String>>,
}

impl Help {
    /// `abide SUB --help`, or `None` when SUB is no subcommand.
    fn of(&mut self, sub: &str) -> Option<&str> {
        self.cache
            .entry(sub.to_owned())
            .or_insert_with(|| {
                let out = Command::new(env!("CARGO_BIN_EXE_abide"))
                    .args([sub, "--help"])
                    .output()
                    .expect("run abide");
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .as_deref()
    }
}

/// Every problem with the command lines in `text` (from `file`); the number checked.
fn check_commands(file: &str, text: &str, help: &mut Help) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (line_no, line) in shell_lines(text) {
        for words in commands(&line) {
            let Some(args) = abide_args(&words) else {
                continue;
            };
            let Some(sub) = args.first() else {
                problems.push(format!("{file}:{line_no}: `abide` without a subcommand"));
                continue;
            };
            checked += 1;
            let Some(text) = help.of(sub) else {
                problems.push(format!("{file}:{line_no}: no subcommand `abide {sub}`"));
                continue;
            };
            for f in args[1..].iter().filter_map(|w| flag(w)) {
                if !lists(text, &f) {
                    problems.push(format!(
                        "{file}:{line_no}: `abide {sub} --help` does not list {f}"
                    ));
                }
            }
        }
    }
    (problems, checked)
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, blanks as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of `[text](target)` links outside code, with their line numbers.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Inline code spans are not links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(k, _)| k % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push((i + 1, after[..end].trim().to_owned()));
            rest = &after[end..];
        }
    }
    out
}

fn check_links(path: &Path, text: &str) -> Vec<String> {
    let file = name(path);
    let dir = path.parent().expect("a file has a directory");
    let mut problems = Vec::new();
    for (line_no, target) in links(text) {
        let target = target.trim_start_matches('<').trim_end_matches('>');
        if target.is_empty() {
            problems.push(format!("{file}:{line_no}: empty link"));
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file_part, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target, None),
        };
        let dest = if file_part.is_empty() {
            path.to_path_buf()
        } else {
            dir.join(file_part)
        };
        if !dest.exists() {
            problems.push(format!("{file}:{line_no}: {target} does not exist"));
            continue;
        }
        if let Some(anchor) = anchor {
            if dest.extension().is_some_and(|x| x == "md")
                && !anchors(&read(&dest)).iter().any(|a| a == anchor)
            {
                problems.push(format!("{file}:{line_no}: {target}: no such heading"));
            }
        }
    }
    problems
}

#[test]
fn every_documented_command_line_uses_real_subcommands_and_flags() {
    let mut help = Help {
        cache: BTreeMap::new(),
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in doc_files() {
        let (p, n) = check_commands(&name(&path), &read(&path), &mut help);
        problems.extend(p);
        checked += n;
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The guide shows every subcommand; a parser that found none would pass vacuously.
    let subs: Vec<&String> = help.cache.keys().collect();
    for sub in [
        "demo", "sim", "send", "serve", "status", "requeue", "inspect", "provider",
    ] {
        assert!(
            help.cache.contains_key(sub),
            "no `abide {sub}` found in the docs; found {subs:?}"
        );
    }
    assert!(checked >= 20, "only {checked} abide command lines found");
}

#[test]
fn every_relative_link_points_to_an_existing_file() {
    let mut problems = Vec::new();
    let mut count = 0;
    for path in doc_files() {
        let text = read(&path);
        count += links(&text).len();
        problems.extend(check_links(&path, &text));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(count >= 20, "only {count} links found");
}

#[test]
fn the_parsers_see_what_a_reader_sees() {
    let md = "```sh\nX=1 abide send --config a.toml \\\n  --db b.db in.jsonl & # bg\n\
              printf 'a|b' | abide inspect - --stdin\n```\n\
              ```text\nabide nothing --here\n```\n";
    let lines = shell_lines(md);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let cmds = commands(&lines[0].1);
    let args = abide_args(&cmds[0]).expect("abide");
    let flags: Vec<String> = args.iter().filter_map(|w| flag(w)).collect();
    assert_eq!(flags, ["--config", "--db"]);
    let piped = commands(&lines[1].1);
    assert_eq!(piped.len(), 2);
    assert_eq!(abide_args(&piped[1]).expect("abide")[0], "inspect");
    assert_eq!(flag("[--limit"), Some("--limit".to_owned()));
    assert_eq!(flag("--failed]"), Some("--failed".to_owned()));
    assert!(lists("  --json\n", "--json"));
    assert!(!lists("  --json-out\n", "--json"));
    assert_eq!(slug("Status and `requeue`"), "status-and-requeue");
    assert_eq!(
        links("see [a](b.md#c) and `[x](y)`"),
        [(1, "b.md#c".to_owned())]
    );
}
