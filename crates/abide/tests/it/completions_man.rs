//! `abide completions` and `abide man`: the real binary's generated scripts and pages.

#![allow(clippy::unwrap_used)]

use crate::support::*;

async fn stdout_of(args: &[&str]) -> String {
    let out = run(abide(args)).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Every subcommand `abide --help` lists, from the binary itself.
async fn subcommands() -> Vec<String> {
    let help = stdout_of(&["--help"]).await;
    let listed: Vec<String> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        // `  name  about`; a wrapped about is indented further.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|w| w != "help")
        .collect();
    assert!(listed.len() >= 10, "{listed:?} from\n{help}");
    listed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_completion_knows_the_subcommands_and_their_flags() {
    let script = stdout_of(&["completions", "bash"]).await;
    assert!(script.contains("abide,send)"), "{script}");
    assert!(script.contains("--config"), "{script}");
    assert!(script.contains("--unreachable-after"), "{script}");
    for sub in subcommands().await {
        assert!(script.contains(&format!("abide,{sub})")), "{sub} missing");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let s = stdout_of(&["completions", shell]).await;
        assert!(s.contains("--config"), "{shell}: {s}");
    }
    let out = run(abide(&["completions", "tcsh"])).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_man_page_is_roff_and_names_every_subcommand() {
    let page = stdout_of(&["man"]).await;
    // clap_mangen opens with groff's apostrophe string (`.ie`/`.el`), then the title.
    let first = page
        .lines()
        .find(|l| !l.starts_with(".ie ") && !l.starts_with(".el "))
        .unwrap();
    assert!(first.starts_with(".TH abide 1"), "{first}");
    assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
    for sub in subcommands().await {
        // roff escapes the dash.
        let named = format!("abide\\-{sub}(1)");
        assert!(page.contains(&named), "{named} missing from\n{page}");
    }
    let send = stdout_of(&["man", "send"]).await;
    assert!(send.contains(".TH abide-send 1"), "{send}");
    assert!(
        send.contains("EXIT CODES") && send.contains("\\-\\-config"),
        "{send}"
    );
    let out = run(abide(&["man", "sned"])).await;
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("one of: inspect"));
}
