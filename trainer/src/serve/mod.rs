//! `mixzero serve`: play the engine and watch its games in a browser.
//!
//! One page (static files embedded in the binary, nothing fetched from
//! elsewhere) and a JSON API over HTTP, with Server-Sent Events for live
//! updates. The server referees with the engine crate: the page sends
//! moves and gets back the position, the legal moves, the rule 5/6 state
//! and the outcome. See `protocol` for the messages, `session` for play,
//! `watch` for run directories, PGN and live arena games, `metrics` for the
//! training plots.
//!
//! `mixzero arena --serve` runs the same server beside a match and shows
//! its games as they are played ([`watch_arena`]).

mod http;
mod metrics;
pub mod protocol;
mod session;
mod watch;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use engine::mcts::SearchConfig;
use models::server::{InferenceServer, ServerConfig};

use crate::eval::external_engine::UciConfig;
use crate::run_dir::resolve_weights;
use http::App;
use session::{Hub, NetSource};
pub use watch::ArenaBoards;
use watch::RunDir;

pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
/// Play sessions (browser tabs) open at once.
const MAX_SESSIONS: usize = 32;

/// What `mixzero serve` serves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// A training run: its games to watch, its metrics to plot, and its
    /// latest checkpoint as the `net` player.
    pub run_dir: Option<PathBuf>,
    /// The `net` player's weights; default: the run directory's latest.
    pub weights: Option<PathBuf>,
    pub listen: Listen,
    /// External engines (`uci:` specs) the page may choose; no others.
    pub engines: Vec<String>,
    /// Searches running at once; further engines wait for a slot.
    pub max_searches: usize,
    /// libtorch threads of the network's inference thread (0 = one per core).
    pub threads: usize,
}

/// Where the page is served.
#[derive(Debug, Clone, Copy)]
pub struct Listen {
    /// IP:PORT (port 0: any free port).
    pub bind: SocketAddr,
    /// Allow an address other than loopback: everyone who can reach it can
    /// then run searches on this machine.
    pub allow_remote: bool,
}

/// Binds the listener, refusing a non-loopback address without
/// `--allow-remote`, and says where the page is.
fn listen(args: &Listen) -> Result<(tiny_http::Server, Option<Vec<String>>)> {
    let loopback = args.bind.ip().is_loopback();
    if !loopback && !args.allow_remote {
        bail!(
            "--bind {} is not a loopback address: anyone who reaches it could run \
             searches here; add --allow-remote if that is what you want",
            args.bind
        );
    }
    let server = tiny_http::Server::http(args.bind)
        .map_err(|e| anyhow::anyhow!("listening on {}: {e}", args.bind))?;
    let addr = server
        .server_addr()
        .to_ip()
        .context("the listener has no IP address")?;
    let allowed_hosts = loopback.then(|| {
        let port = addr.port();
        vec![
            addr.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ]
    });
    if loopback {
        println!("mixzero serve: http://{addr}/ (loopback only: this machine alone can connect)");
    } else {
        tracing::warn!(
            "listening on {addr}, which is not loopback: every machine that reaches it \
             can play, read the run directory's games and metrics, and use the engines"
        );
        println!("mixzero serve: http://{addr}/ (reachable from the network)");
    }
    std::io::stdout().flush()?;
    Ok((server, allowed_hosts))
}

/// Serves the page until the process ends.
pub fn run(args: ServeOptions) -> Result<()> {
    for spec in &args.engines {
        UciConfig::parse(spec).with_context(|| format!("--engine `{spec}`"))?;
    }
    let run_dir = args
        .run_dir
        .as_deref()
        .map(|dir| RunDir::new(dir).with_context(|| format!("--run-dir {}", dir.display())))
        .transpose()?;
    let weights = match (&args.weights, &args.run_dir) {
        (Some(path), _) => Some(resolve_weights(path)?),
        (None, Some(dir)) => match resolve_weights(dir) {
            Ok(path) => Some(path),
            Err(e) => {
                tracing::warn!("no network to play (`net` is off): {e:#}");
                None
            }
        },
        (None, None) => None,
    };
    let mut server = None;
    let net = match weights {
        Some(path) => {
            let net = models::weights::load(&path, models::device())
                .with_context(|| format!("loading {}", path.display()))?;
            let history = net.arch().encoder.history;
            let started = InferenceServer::start(
                net,
                ServerConfig {
                    max_batch: SearchConfig::play().leaves_in_flight * args.max_searches.max(1),
                    max_wait_us: 200,
                    threads: args.threads,
                    replicas: 1,
                    precision: models::Precision::Auto,
                },
            );
            let source = NetSource {
                name: path.display().to_string(),
                client: started.client(),
                history,
            };
            tracing::info!(device = ?models::device(), weights = %path.display(), "network loaded");
            server = Some(started);
            Some(source)
        }
        None => None,
    };
    let hub = Arc::new(Hub::new(net, args.engines, args.max_searches, MAX_SESSIONS));
    let (listener, allowed_hosts) = listen(&args.listen)?;
    let app = Arc::new(App::new(hub, run_dir, None, allowed_hosts));
    let served = http::serve(&listener, &app).context("serving");
    // The inference server outlives every search that uses it.
    drop(server);
    served
}

/// Serves the games of this process's arena matches, as they are played,
/// from a thread of its own that ends with the process.
pub fn watch_arena(listen_at: Listen) -> Result<()> {
    let boards = Arc::new(ArenaBoards::default());
    let (listener, allowed_hosts) = listen(&listen_at)?;
    let hub = Arc::new(Hub::new(None, Vec::new(), 1, MAX_SESSIONS));
    let app = Arc::new(App::new(
        hub,
        None,
        Some(Arc::clone(&boards)),
        allowed_hosts,
    ));
    let watcher = Arc::clone(&boards);
    if crate::eval::arena::WATCHER
        .set(Box::new(move |names, game| watcher.observe(names, game)))
        .is_err()
    {
        bail!("an arena watcher is already set in this process");
    }
    // Not joined: it serves until the process ends with the match.
    std::thread::spawn(move || {
        if let Err(e) = http::serve(&listener, &app) {
            tracing::error!("arena server: {e}");
        }
    });
    Ok(())
}
