//! `mixzero serve` against garbage: random bytes, mutated commands,
//! oversized bodies, bad queries and paths, foreign hosts and origins, and
//! raw non-HTTP bytes. Every answer must be a 4xx with a JSON error (never
//! a 5xx or a dropped server), and a game must still work afterwards.

mod serve_common;

use std::io::{Read, Write};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use serve_common::*;

/// A 4xx answer with `{"error": "..."}`.
fn refused(what: &str, (status, body): (u16, String)) {
    assert!(
        (400..500).contains(&status),
        "{what}: status {status}: {body}"
    );
    let value: Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
    assert!(value["error"].is_string(), "{what}: {body}");
}

fn mutate(rng: &mut SmallRng, text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..rng.random_range(1..6) {
        let i = rng.random_range(0..bytes.len());
        match rng.random_range(0..3) {
            0 => bytes[i] = rng.random(),
            1 => {
                bytes.remove(i);
            }
            _ => {
                let tokens = b"{}[]\",:\\0e9";
                bytes.insert(i, tokens[rng.random_range(0..tokens.len())]);
            }
        }
    }
    bytes
}

#[test]
fn garbage_is_refused_and_the_server_carries_on() {
    let mut server = Server::start(&["serve"]);
    let url = server.url.clone();
    let (session, _) = new_session(&server);
    let mut rng = SmallRng::seed_from_u64(14);

    let valid = [
        json!({"session": session, "command": {"type": "move", "move": "e2e4"}}),
        json!({"session": session, "command": {"type": "new_game", "white": "human", "black": "human", "fen": "k9/10/10/10/10/10/10/10/10/9K w - - 0 1"}}),
        json!({"session": session, "command": {"type": "takeback"}}),
    ]
    .map(|v| v.to_string());
    for round in 0..300 {
        let body: Vec<u8> = match round % 3 {
            0 => (0..rng.random_range(0..200))
                .map(|_| rng.random())
                .collect(),
            _ => mutate(&mut rng, &valid[round % valid.len()]),
        };
        let (status, reply) = post(&format!("{url}/api/command"), &body);
        // A mutation may still be a valid command; anything else is refused.
        if status != 200 {
            refused(
                &format!("body {:?}", String::from_utf8_lossy(&body)),
                (status, reply),
            );
        }
    }

    let well_formed_but_wrong = [
        json!({"session": "nope", "command": {"type": "takeback"}}),
        json!({"session": session, "command": {"type": "move", "move": "e2e9"}}),
        json!({"session": session, "command": {"type": "move", "move": "z9z9"}}),
        json!({"session": session, "command": {"type": "move", "move": "e2e4", "extra": 1}}),
        json!({"session": session, "command": {"type": "move", "move": 42}}),
        json!({"session": session, "command": {"type": "new_game", "white": "uci:rm -rf /", "black": "human"}}),
        json!({"session": session, "command": {"type": "new_game", "white": "human", "black": "human", "fen": "8/8/8/8/8/8/8/8 w - - 0 1"}}),
        json!({"session": session, "command": {"type": "resign"}}),
        json!([1, 2, 3]),
        json!(null),
    ];
    for body in well_formed_but_wrong {
        refused(
            &body.to_string(),
            post(&format!("{url}/api/command"), body.to_string()),
        );
    }

    // Oversized bodies.
    let big = vec![b'a'; 20_000];
    refused(
        "oversized command",
        post(&format!("{url}/api/command"), &big),
    );
    let huge = vec![b'['; 1_100_000];
    refused("oversized PGN", post(&format!("{url}/api/pgn"), &huge));

    // Bad PGN, queries and paths (no run directory here, and none allowed).
    refused(
        "bad PGN",
        post(&format!("{url}/api/pgn"), "1. e4 e5 2. Qxz9 *"),
    );
    refused("no game", post(&format!("{url}/api/pgn?game=5"), "1. e4 *"));
    refused(
        "bad index",
        post(&format!("{url}/api/pgn?game=x"), "1. e4 *"),
    );
    for path in [
        "/api/pgn?path=..%2F..%2Fetc%2Fpasswd",
        "/api/pgn?path=%zz",
        "/api/live",
        "/api/metrics",
        "/api/arena",
        "/api/events",
        "/api/events?session=nope",
        "/api/nothing",
        "/etc/passwd",
        "/../../etc/passwd",
    ] {
        refused(path, get(&format!("{url}{path}")));
    }
    refused("GET a POST endpoint", get(&format!("{url}/api/command")));

    // Foreign Host and Origin headers (DNS rebinding, cross-site posts).
    let agent = agent();
    let mut response = agent
        .get(&format!("{url}/api/info"))
        .header("Host", "evil.example:80")
        .call()
        .unwrap();
    let status = response.status().as_u16();
    refused(
        "foreign Host",
        (status, response.body_mut().read_to_string().unwrap()),
    );
    let mut response = agent
        .post(&format!("{url}/api/session"))
        .header("Origin", "http://evil.example")
        .send("")
        .unwrap();
    let status = response.status().as_u16();
    refused(
        "foreign Origin",
        (status, response.body_mut().read_to_string().unwrap()),
    );

    // Raw bytes that are not HTTP at all.
    let addr = url.trim_start_matches("http://").to_string();
    for _ in 0..20 {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let junk: Vec<u8> = (0..rng.random_range(1..500))
            .map(|_| rng.random())
            .collect();
        let _ = stream.write_all(&junk);
        let _ = stream.write_all(b"\r\n\r\n");
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    }

    // Still alive and still refereeing.
    assert!(server.alive());
    let (status, state) = command(
        &server,
        &session,
        json!({"type": "new_game", "white": "human", "black": "human"}),
    );
    assert_eq!(status, 200, "{state}");
    let (status, state) = command(&server, &session, json!({"type": "move", "move": "e2e4"}));
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["moves"][0]["san"], "e4");
}
