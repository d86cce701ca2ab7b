//! The HTTP side: routing, the static page, JSON answers, request limits,
//! the Host and Origin checks, and the Server-Sent Events stream a play
//! session's page listens on. One thread per request, a bounded number.
//!
//! Why the Host and Origin checks: the server runs engines for whoever
//! reaches it. Another web site open in the same browser could otherwise
//! post commands to `127.0.0.1` (its requests carry a foreign `Origin`) or
//! reach it through a DNS name rebound to loopback (a foreign `Host`).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tiny_http::{Header, Method, Request, Response};

use super::metrics;
use super::protocol::{
    parse_command, parse_query, ErrorReply, InfoMsg, ProtocolError, MAX_PGN_BYTES,
};
use super::session::{Cursor, Event, Hub, Session};
use super::watch::{pgn_answer, ArenaBoards, RunDir};

/// Requests handled at once; more are answered 503 at once.
const MAX_HANDLERS: usize = 64;
/// An idle event stream sends a comment this often, which is also how
/// soon a closed tab is noticed (the write fails).
const PING_EVERY: Duration = Duration::from_secs(2);

const INDEX_HTML: &str = include_str!("static/index.html");
const APP_JS: &str = include_str!("static/app.js");
const STYLE_CSS: &str = include_str!("static/style.css");

/// Everything a request handler needs.
pub struct App {
    pub hub: Arc<Hub>,
    pub run_dir: Option<RunDir>,
    pub arena: Option<Arc<ArenaBoards>>,
    /// `Host` values accepted; `None` accepts any (a deliberate remote bind).
    pub allowed_hosts: Option<Vec<String>>,
    handlers: AtomicUsize,
}

impl App {
    pub fn new(
        hub: Arc<Hub>,
        run_dir: Option<RunDir>,
        arena: Option<Arc<ArenaBoards>>,
        allowed_hosts: Option<Vec<String>>,
    ) -> App {
        App {
            hub,
            run_dir,
            arena,
            allowed_hosts,
            handlers: AtomicUsize::new(0),
        }
    }
}

/// Answers requests until the listener fails.
pub fn serve(server: &tiny_http::Server, app: &Arc<App>) -> std::io::Result<()> {
    loop {
        let Some(request) = server.recv_timeout(Duration::from_secs(5))? else {
            app.hub.reap();
            continue;
        };
        if app.handlers.fetch_add(1, Ordering::AcqRel) >= MAX_HANDLERS {
            app.handlers.fetch_sub(1, Ordering::AcqRel);
            respond_error(
                request,
                &ProtocolError::Busy("too many requests at once".into()),
            );
            continue;
        }
        let app = Arc::clone(app);
        std::thread::spawn(move || {
            handle(&app, request);
            app.handlers.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

enum Reply {
    Json(String),
    Static(&'static str, &'static str),
    Events(Arc<Session>),
}

fn json(value: &impl Serialize) -> Result<Reply, ProtocolError> {
    Ok(Reply::Json(serde_json::to_string(value)?))
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("ASCII header")
}

fn respond_error(request: Request, error: &ProtocolError) {
    let body = serde_json::to_string(&ErrorReply {
        error: error.to_string(),
    })
    .unwrap_or_else(|_| "{\"error\":\"?\"}".into());
    let response = Response::from_string(body)
        .with_status_code(error.status())
        .with_header(header("Content-Type", "application/json"))
        .with_header(header("Cache-Control", "no-store"));
    // The client may be gone; nothing to do about it.
    let _ = request.respond(response);
}

fn handle(app: &Arc<App>, mut request: Request) {
    match route(app, &mut request) {
        Ok(Reply::Json(body)) => {
            let response = Response::from_string(body)
                .with_header(header("Content-Type", "application/json"))
                .with_header(header("Cache-Control", "no-store"));
            let _ = request.respond(response);
        }
        Ok(Reply::Static(body, kind)) => {
            let response = Response::from_string(body)
                .with_header(header("Content-Type", kind))
                .with_header(header("X-Content-Type-Options", "nosniff"))
                .with_header(header(
                    "Content-Security-Policy",
                    "default-src 'self'; img-src 'self' data:",
                ));
            let _ = request.respond(response);
        }
        Ok(Reply::Events(session)) => stream(app, request, &session),
        Err(e) => {
            tracing::debug!(url = request.url(), "refused: {e}");
            respond_error(request, &e);
        }
    }
}

fn header_value<'a>(request: &'a Request, name: &'static str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// The Host check for every request, and the Origin check for commands.
fn check_origin(app: &App, request: &Request) -> Result<(), ProtocolError> {
    let Some(allowed) = &app.allowed_hosts else {
        return Ok(());
    };
    let host = header_value(request, "Host").unwrap_or("");
    if !allowed.iter().any(|h| h == host) {
        return Err(ProtocolError::Forbidden(format!("Host `{host}`")));
    }
    if *request.method() != Method::Get {
        if let Some(origin) = header_value(request, "Origin") {
            if origin != format!("http://{host}") {
                return Err(ProtocolError::Forbidden(format!("Origin `{origin}`")));
            }
        }
    }
    Ok(())
}

/// Reads a body of at most `limit` bytes.
fn read_body(request: &mut Request, limit: usize) -> Result<Vec<u8>, ProtocolError> {
    if request.body_length().is_some_and(|n| n > limit) {
        return Err(ProtocolError::TooLarge { limit });
    }
    let mut body = Vec::new();
    request
        .as_reader()
        .take(limit as u64 + 1)
        .read_to_end(&mut body)?;
    if body.len() > limit {
        return Err(ProtocolError::TooLarge { limit });
    }
    Ok(body)
}

fn run_dir(app: &App) -> Result<&RunDir, ProtocolError> {
    app.run_dir
        .as_ref()
        .ok_or_else(|| ProtocolError::NotFound("no run directory (start with --run-dir)".into()))
}

fn game_index(query: &[(String, String)], key: &str) -> Result<Option<usize>, ProtocolError> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| {
            v.parse()
                .map_err(|_| ProtocolError::BadQuery(format!("{key} `{v}` is not a number")))
        })
        .transpose()
}

fn route(app: &Arc<App>, request: &mut Request) -> Result<Reply, ProtocolError> {
    check_origin(app, request)?;
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let query = parse_query(query)?;
    let param = |key: &str| {
        query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let method = request.method().clone();
    match (method, path) {
        (Method::Get, "/" | "/index.html") => {
            Ok(Reply::Static(INDEX_HTML, "text/html; charset=utf-8"))
        }
        (Method::Get, "/app.js") => Ok(Reply::Static(APP_JS, "text/javascript; charset=utf-8")),
        (Method::Get, "/style.css") => Ok(Reply::Static(STYLE_CSS, "text/css; charset=utf-8")),
        (Method::Get, "/api/info") => json(&InfoMsg {
            version: env!("CARGO_PKG_VERSION"),
            network: app.hub.net.as_ref().map(|n| n.name.clone()),
            engines: app.hub.engines.clone(),
            run_dir: app.run_dir.is_some(),
            arena: app.arena.is_some(),
            max_searches: app.hub.max_searches(),
        }),
        (Method::Post, "/api/session") => {
            // Any body is ignored, but read within the limit.
            read_body(request, super::protocol::MAX_COMMAND_BYTES)?;
            let session = app.hub.create_session()?;
            json(&serde_json::json!({ "session": session.id, "state": session.state() }))
        }
        (Method::Get, "/api/events") => {
            let id =
                param("session").ok_or_else(|| ProtocolError::BadQuery("no session".into()))?;
            Ok(Reply::Events(app.hub.session(id)?))
        }
        (Method::Post, "/api/command") => {
            let body = read_body(request, super::protocol::MAX_COMMAND_BYTES)?;
            let command = parse_command(&body)?;
            let session = app.hub.session(&command.session)?;
            json(&session.command(&app.hub, command.command)?)
        }
        (Method::Get, "/api/games") => json(&run_dir(app)?.list()),
        (Method::Get, "/api/live") => json(&run_dir(app)?.live()?),
        (Method::Get, "/api/pgn") => {
            let rel = param("path").ok_or_else(|| ProtocolError::BadQuery("no path".into()))?;
            let text = run_dir(app)?.read_pgn(rel)?;
            json(&pgn_answer(
                &text,
                Some(rel.to_string()),
                game_index(&query, "game")?,
            )?)
        }
        (Method::Post, "/api/pgn") => {
            let body = read_body(request, MAX_PGN_BYTES)?;
            let text = String::from_utf8(body).map_err(|_| ProtocolError::NotUtf8)?;
            json(&pgn_answer(&text, None, game_index(&query, "game")?)?)
        }
        (Method::Get, "/api/arena") => {
            let arena = app
                .arena
                .as_ref()
                .ok_or_else(|| ProtocolError::NotFound("no arena in this process".into()))?;
            match game_index(&query, "board")? {
                Some(board) => json(&arena.view(board)?),
                None => json(&arena.list()),
            }
        }
        (Method::Get, "/api/metrics") => json(&metrics::read(run_dir(app)?.root())?),
        (_, "/" | "/index.html" | "/app.js" | "/style.css") => Err(ProtocolError::MethodNotAllowed),
        (_, path) if path.starts_with("/api/") => Err(ProtocolError::NotFound(format!(
            "no endpoint {path} for this method"
        ))),
        (_, path) => Err(ProtocolError::NotFound(path.chars().take(100).collect())),
    }
}

/// Streams a session's state and what its engine thinks as Server-Sent
/// Events until the page goes away; the session's search stops then.
fn stream(app: &Arc<App>, request: Request, session: &Arc<Session>) {
    let mut writer = request.into_writer();
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                Cache-Control: no-store\r\nConnection: close\r\n\r\n";
    if writer
        .write_all(head.as_bytes())
        .and_then(|()| writer.flush())
        .is_err()
    {
        return;
    }
    session.attach(&app.hub);
    let mut cursor = Cursor::default();
    loop {
        let mut text = String::new();
        match session.next_events(&mut cursor, PING_EVERY) {
            None => text.push_str(": ping\n\n"),
            Some(events) => {
                for event in events {
                    let (name, data) = match &event {
                        Event::State(state) => ("state", serde_json::to_string(state)),
                        Event::Thinking(thinking) => ("thinking", serde_json::to_string(thinking)),
                    };
                    let Ok(data) = data else { continue };
                    text.push_str(&format!("event: {name}\ndata: {data}\n\n"));
                }
            }
        }
        if writer
            .write_all(text.as_bytes())
            .and_then(|()| writer.flush())
            .is_err()
        {
            break;
        }
    }
    session.detach();
}
