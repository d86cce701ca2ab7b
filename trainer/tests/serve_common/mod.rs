//! Shared by the `serve_*` tests: a `mixzero serve` child process on a free
//! loopback port, a small HTTP client, the event stream reader, and a W3C
//! WebDriver client over chromedriver's HTTP JSON API.
#![allow(dead_code)] // each test file uses a different part

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A running `mixzero serve` (or `arena --serve`), killed on drop.
pub struct Server {
    child: Child,
    pub url: String,
}

impl Server {
    /// Starts `mixzero ARGS --bind 127.0.0.1:0` and waits for its address.
    pub fn start(args: &[&str]) -> Server {
        let mut args = args.to_vec();
        args.extend(["--bind", "127.0.0.1:0"]);
        Server::start_exactly(&args)
    }

    /// Starts `mixzero ARGS` (which name the address) and waits for it.
    pub fn start_exactly(args: &[&str]) -> Server {
        let child = Command::new(env!("CARGO_BIN_EXE_mixzero"))
            .args(args)
            // SERVE_LOG=debug shows the server's own log when a test fails.
            .env(
                "RUST_LOG",
                std::env::var("SERVE_LOG").unwrap_or("warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting mixzero");
        // Owned by a `Server` at once, so that a panic below still kills it.
        let mut server = Server {
            child,
            url: String::new(),
        };
        let stdout = server.child.stdout.take().expect("piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = receiver
                .recv_timeout(left)
                .expect("mixzero printed no address");
            if let Some(rest) = line.split("http://").nth(1) {
                let url = format!("http://{}", rest.split('/').next().unwrap());
                // Later lines (the arena's game lines) are drained so the pipe never fills.
                std::thread::spawn(move || while receiver.recv().is_ok() {});
                server.url = url;
                return server;
            }
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("waiting on mixzero").is_none()
    }

    /// Waits for the process to exit by itself.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// GET: status and body.
pub fn get(url: &str) -> (u16, String) {
    let mut response = agent().get(url).call().expect("GET");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_to_string().unwrap_or_default(),
    )
}

/// POST a body: status and body.
pub fn post(url: &str, body: impl AsRef<[u8]>) -> (u16, String) {
    let mut response = agent()
        .post(url)
        .header("Content-Type", "application/json")
        .send(body.as_ref())
        .expect("POST");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_to_string().unwrap_or_default(),
    )
}

pub fn post_json(url: &str, value: &Value) -> (u16, Value) {
    let (status, body) = post(url, value.to_string());
    let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, value)
}

/// A new play session: its id and first state.
pub fn new_session(server: &Server) -> (String, Value) {
    let (status, reply) = post_json(&format!("{}/api/session", server.url), &json!({}));
    assert_eq!(status, 200, "{reply}");
    (
        reply["session"].as_str().unwrap().to_string(),
        reply["state"].clone(),
    )
}

pub fn command(server: &Server, session: &str, command: Value) -> (u16, Value) {
    post_json(
        &format!("{}/api/command", server.url),
        &json!({ "session": session, "command": command }),
    )
}

/// The event stream of a session, read on its own thread: (event, data).
/// Dropping it closes the connection (the "tab" goes away).
pub struct Events {
    pub receiver: mpsc::Receiver<(String, Value)>,
    stream: std::net::TcpStream,
}

impl Events {
    pub fn open(server: &Server, session: &str) -> Events {
        use std::io::Write;
        let addr = server.url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr).expect("connecting");
        write!(
            stream,
            "GET /api/events?session={session} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut event = String::new();
            for line in reader.lines().map_while(Result::ok) {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = name.to_string();
                } else if let Some(data) = line.strip_prefix("data: ") {
                    let value: Value = serde_json::from_str(data).expect("event data is JSON");
                    if sender.send((event.clone(), value)).is_err() {
                        return;
                    }
                }
            }
        });
        Events { receiver, stream }
    }

    /// The next state for which `done` holds.
    pub fn state_until(&self, timeout: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.receiver.recv_timeout(left) {
                Ok((name, state)) if name == "state" && done(&state) => return state,
                Ok(_) => {}
                Err(e) => panic!("no such state within {timeout:?}: {e}"),
            }
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// A human is to move (the engine has answered).
pub fn human_to_move(state: &Value) -> bool {
    let side = if state["side"] == "white" { 0 } else { 1 };
    state["outcome"].is_null() && state["players"][side] == "human" && state["thinking"] == false
}

/// A tiny random network saved at `path` (fast to search).
pub fn save_tiny_net(path: &Path) {
    use models::encoding::EncoderConfig;
    use models::net::{Architecture, Net, NetConfig};
    let arch = Architecture {
        net: NetConfig::new(1, 8),
        encoder: EncoderConfig::default(),
    };
    models::weights::save(&Net::new(arch, tch::Device::Cpu), path).unwrap();
}

/// Where the browser test leaves its screenshots.
pub fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/serve-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A program on the PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A headless Chromium through chromedriver on a free loopback port; both
/// end on drop.
pub struct Browser {
    driver: Child,
    base: String,
    agent: ureq::Agent,
}

impl Browser {
    /// `None` (and the caller skips) only when chromium or chromedriver is missing.
    pub fn start() -> Option<Browser> {
        let chromium = which("chromium").or_else(|| which("chromium-browser"))?;
        let chromedriver = which("chromedriver")?;
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let agent = agent();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut browser = Browser {
            driver,
            base: base.clone(),
            agent,
        };
        while agent_ready(&browser.agent, &base).is_none() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1400,1000",
                         "--force-device-scale-factor=1"]
            }
        }}});
        let session = browser.call("POST", "/session", Some(caps));
        let id = session["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        browser.base = format!("{base}/session/{id}");
        Some(browser)
    }

    fn call(&mut self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// A WebDriver command; `Err` with the driver's answer when it fails.
    fn try_call(&mut self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, body) => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body.unwrap_or(json!({})).to_string()),
        };
        let mut response = response.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match status {
            200 => Ok(value["value"].clone()),
            _ => Err(format!("{status} {}", &text[..text.len().min(300)])),
        }
    }

    pub fn goto(&mut self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url })));
    }

    pub fn find(&mut self, css: &str) -> String {
        let value = self.call(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        value[ELEMENT].as_str().expect("an element").to_string()
    }

    /// Clicks an element, finding it again if the page redrew it meanwhile.
    pub fn click(&mut self, css: &str) {
        for _ in 0..10 {
            let id = self.find(css);
            match self.try_call("POST", &format!("/element/{id}/click"), None) {
                Ok(_) => return,
                Err(e) if e.contains("stale element") => continue,
                Err(e) => panic!("click {css}: {e}"),
            }
        }
        panic!("click {css}: the element kept going stale");
    }

    /// Types into an element (for a file input: the file's path).
    pub fn type_into(&mut self, css: &str, text: &str) {
        let id = self.find(css);
        self.call("POST", &format!("/element/{id}/clear"), None);
        self.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        );
    }

    pub fn text(&mut self, css: &str) -> String {
        // One round trip: between a `find` and a text request the page may
        // redraw the element, and WebDriver then answers "stale element".
        let value = self.js(&format!(
            "const e = document.querySelector({css:?}); return e && e.innerText;"
        ));
        match value.as_str() {
            Some(text) => text.trim().to_string(),
            None => panic!("no element {css}"),
        }
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub fn js(&mut self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Presses a key (a WebDriver key code such as "\u{E014}", right arrow).
    pub fn key(&mut self, key: &str) {
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
            {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]}]});
        self.call("POST", "/actions", Some(actions));
    }

    /// Drags with the mouse from one element's centre to another's (by
    /// viewport position: the page may redraw the elements meanwhile).
    pub fn drag(&mut self, from: &str, to: &str) {
        let centre = |b: &mut Browser, css: &str| {
            let script = format!(
                "const r = document.querySelector(\"{css}\").getBoundingClientRect(); \
                 return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)];"
            );
            let v = b.js(&script);
            (v[0].as_i64().unwrap(), v[1].as_i64().unwrap())
        };
        let ((x0, y0), (x1, y1)) = (centre(self, from), centre(self, to));
        let actions = json!({"actions": [{"type": "pointer", "id": "mouse",
            "parameters": {"pointerType": "mouse"}, "actions": [
                {"type": "pointerMove", "origin": "viewport", "x": x0, "y": y0},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerMove", "origin": "viewport", "x": (x0 + x1) / 2, "y": (y0 + y1) / 2, "duration": 150},
                {"type": "pointerMove", "origin": "viewport", "x": x1, "y": y1, "duration": 150},
                {"type": "pointerUp", "button": 0}]}]});
        self.call("POST", "/actions", Some(actions));
        self.call("DELETE", "/actions", None);
    }

    pub fn screenshot(&mut self, path: &Path) {
        let data = self.call("GET", "/screenshot", None);
        let png = base64_decode(data.as_str().expect("base64 PNG"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap();
    }

    /// Polls `check` until it returns `Some`, or panics saying `what`.
    pub fn wait_for<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&mut Browser) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = check(self) {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn agent_ready(agent: &ureq::Agent, base: &str) -> Option<()> {
    let mut response = agent.get(&format!("{base}/status")).call().ok()?;
    let text = response.body_mut().read_to_string().ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    (value["value"]["ready"] == true).then_some(())
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.agent.delete(&self.base).call();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text.bytes().filter(|&c| c != b'=' && c != b'\n').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= (value(c) as u32) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
