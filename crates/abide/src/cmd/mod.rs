//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`;
//! async commands build their own tokio runtime inside `run`.

pub(crate) mod check;
pub(crate) mod completions;
pub(crate) mod demo;
pub(crate) mod inspect;
pub(crate) mod man;
pub(crate) mod provider;
pub(crate) mod proxy;
pub(crate) mod requeue;
pub(crate) mod send;
pub(crate) mod serve;
pub(crate) mod sim;
pub(crate) mod status;

/// Write `text` to stdout and flush it, returning the error instead of panicking as
/// `print!` does when the reader has gone (`abide status --json | head`): `main` ends
/// quietly on a closed pipe, as other Unix tools do.
///
/// # Errors
/// The write failed (a closed pipe, a full disk behind a redirect).
pub(crate) fn out(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// Bind the listener of `serve` or `proxy` at `addr` and print `listening on http://ADDR`
/// as the first line on stdout (port 0 resolved), which scripts and tests wait for.
///
/// # Errors
/// The address cannot be bound; stdout cannot be written.
pub(crate) async fn listen(
    addr: std::net::SocketAddr,
) -> anyhow::Result<(tokio::net::TcpListener, std::net::SocketAddr)> {
    use anyhow::Context as _;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let bound = listener.local_addr()?;
    out(&format!("listening on http://{bound}\n"))?;
    Ok((listener, bound))
}
