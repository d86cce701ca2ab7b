//! The store's behaviour, written once and run against every backend: a
//! plain directory, a `file://` URL and a real S3 server (s3s-fs, started by
//! scripts/test.sh; see scripts/s3-server.sh). Then the failures a user
//! meets first: garbage URLs, an unreachable endpoint, wrong credentials, a
//! missing bucket.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use store::layout::{self, NetPointer, LATEST_NET};
use store::test_server::TestServer;
use store::{Entry, Store, StoreError};
use tempfile::TempDir;

/// A store and what must live as long as it.
struct Backend {
    store: Store,
    _dir: Option<TempDir>,
}

fn dir_backend() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist yet: opening creates it.
    let path = dir.path().join("run");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    Backend {
        store,
        _dir: Some(dir),
    }
}

fn file_url_backend() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/run", dir.path().display());
    let store = Store::open(&url).unwrap();
    Backend {
        store,
        _dir: Some(dir),
    }
}

fn s3_backend(test: &str) -> Backend {
    let s3 = TestServer::from_env();
    let store = s3.open(&s3.fresh_url(test), s3.vars()).unwrap();
    Backend { store, _dir: None }
}

/// Runs each behaviour test on each backend: `dir::round_trip`,
/// `file_url::round_trip`, `s3::round_trip`, ...
macro_rules! on_every_backend {
    ($($test:ident),* $(,)?) => {
        mod dir {
            $( #[test] fn $test() { super::$test(&super::dir_backend().store); } )*
        }
        mod file_url {
            $( #[test] fn $test() { super::$test(&super::file_url_backend().store); } )*
        }
        mod s3 {
            $( #[test] fn $test() {
                super::$test(&super::s3_backend(stringify!($test)).store);
            } )*
        }
    };
}

on_every_backend!(
    round_trip,
    put_new_refuses_an_existing_key,
    put_pointer_overwrites,
    list_after_pages_in_key_order,
    one_store_serves_many_threads,
    keys_must_be_relative_paths,
    nets_are_published_through_the_pointer,
);

fn keys(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|e| e.key.as_str()).collect()
}

fn round_trip(store: &Store) {
    assert_eq!(store.get("games/w1/00000001.chunk").unwrap(), None);
    assert_eq!(store.list_after("", None, 100).unwrap(), []);

    store
        .put_new("games/w1/00000001.chunk", &b"first"[..])
        .unwrap();
    store
        .put_new("games/w2/00000001.chunk", vec![7u8; 1000])
        .unwrap();
    store.put_pointer("nets/latest", &b"{}"[..]).unwrap();
    assert_eq!(
        store.get("games/w1/00000001.chunk").unwrap().as_deref(),
        Some(&b"first"[..])
    );
    assert_eq!(
        store.list_after("", None, 100).unwrap(),
        [
            Entry {
                key: "games/w1/00000001.chunk".into(),
                size: 5
            },
            Entry {
                key: "games/w2/00000001.chunk".into(),
                size: 1000
            },
            Entry {
                key: "nets/latest".into(),
                size: 2
            },
        ]
    );
    assert_eq!(store.list_dirs("").unwrap(), ["games", "nets"]);
    assert_eq!(store.list_dirs("games").unwrap(), ["w1", "w2"]);
    // A reader of headers takes the first bytes alone.
    assert_eq!(
        store
            .get_range("games/w1/00000001.chunk", 1..4)
            .unwrap()
            .as_deref(),
        Some(&b"irs"[..])
    );
    assert_eq!(
        store.get_range("games/w9/00000001.chunk", 0..4).unwrap(),
        None
    );
    // Objects at one level, beside its directories.
    store.put_new("games/old.chunk", &b"old"[..]).unwrap();
    let files = store.list_files("games").unwrap();
    let keys_sizes: Vec<(&str, u64)> = files
        .iter()
        .map(|(e, _)| (e.key.as_str(), e.size))
        .collect();
    assert_eq!(keys_sizes, [("games/old.chunk", 3)]);
    let age = files[0].1.elapsed().unwrap_or_default();
    assert!(age < Duration::from_secs(600), "written {age:?} ago");
    assert!(store.list_files("nowhere").unwrap().is_empty());
    store.delete("games/old.chunk").unwrap();

    store.delete("games/w1/00000001.chunk").unwrap();
    assert_eq!(store.get("games/w1/00000001.chunk").unwrap(), None);
    // Deleting again is not an error (a retried cleanup).
    store.delete("games/w1/00000001.chunk").unwrap();
    assert_eq!(
        keys(&store.list_after("games", None, 100).unwrap()),
        ["games/w2/00000001.chunk"]
    );
}

fn put_new_refuses_an_existing_key(store: &Store) {
    store
        .put_new("nets/00000001.safetensors", &b"one"[..])
        .unwrap();
    let err = store
        .put_new("nets/00000001.safetensors", &b"two"[..])
        .unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyExists { ref key, .. } if key == "nets/00000001.safetensors")
    );
    let message = err.to_string();
    assert!(
        message.contains("`nets/00000001.safetensors` already exists in store"),
        "{message}"
    );
    assert!(message.contains(store.url()), "{message}");
    assert_eq!(
        store.get("nets/00000001.safetensors").unwrap().as_deref(),
        Some(&b"one"[..])
    );
    // Nor does a pointer write make a key free again for put_new.
    store
        .put_pointer("nets/00000001.safetensors", &b"three"[..])
        .unwrap();
    assert!(matches!(
        store.put_new("nets/00000001.safetensors", &b"four"[..]),
        Err(StoreError::AlreadyExists { .. })
    ));
}

fn put_pointer_overwrites(store: &Store) {
    store.put_pointer("nets/latest", &b"old"[..]).unwrap();
    store
        .put_pointer("nets/latest", &b"a longer new value"[..])
        .unwrap();
    assert_eq!(
        store.get("nets/latest").unwrap().as_deref(),
        Some(&b"a longer new value"[..])
    );
    store.put_pointer("nets/latest", &b"short"[..]).unwrap();
    assert_eq!(
        store.get("nets/latest").unwrap().as_deref(),
        Some(&b"short"[..])
    );
    assert_eq!(store.list_after("nets", None, 10).unwrap().len(), 1);
}

fn list_after_pages_in_key_order(store: &Store) {
    let prefix = layout::worker_prefix("w1").unwrap();
    let key = |seq| layout::chunk_key("w1", seq, "chunk").unwrap();
    // Written out of order, next to neighbours the prefix must exclude:
    // `games/w10` shares the characters but not the segment.
    for seq in (0..50).rev() {
        store.put_new(&key(seq), vec![0u8; seq as usize]).unwrap();
    }
    store
        .put_new(&layout::chunk_key("w10", 1, "chunk").unwrap(), &b"x"[..])
        .unwrap();
    store.put_new("gamesx", &b"x"[..]).unwrap();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store.list_after(&prefix, cursor.as_deref(), 7).unwrap();
        assert!(page.len() <= 7);
        let Some(last) = page.last() else { break };
        cursor = Some(last.key.clone());
        seen.extend(page);
    }
    let expected: Vec<Entry> = (0..50)
        .map(|seq| Entry {
            key: key(seq),
            size: seq,
        })
        .collect();
    assert_eq!(seen, expected);

    // A poll with the last cursor finds only what is new.
    assert_eq!(store.list_after(&prefix, cursor.as_deref(), 7).unwrap(), []);
    store.put_new(&key(50), &b"new"[..]).unwrap();
    store.put_new(&key(51), &b"newer"[..]).unwrap();
    assert_eq!(
        keys(&store.list_after(&prefix, cursor.as_deref(), 7).unwrap()),
        [key(50), key(51)]
    );
    assert_eq!(store.list_dirs("games").unwrap(), ["w1", "w10"]);
}

/// Create-only puts racing for one key, on each backend.
mod concurrent_put_new {
    use super::*;

    #[test]
    fn dir() {
        exactly_one_winner(&dir_backend().store);
    }

    #[test]
    fn file_url() {
        exactly_one_winner(&file_url_backend().store);
    }

    /// AWS S3, MinIO and R2 evaluate `If-None-Match: *` atomically; s3s-fs
    /// checks it before writing and renames afterwards, so racing writers
    /// may all win there. Run against such a server with
    /// `cargo test -p store -- --ignored` and MIXZERO_TEST_S3_* set to it.
    #[test]
    #[ignore = "s3s-fs checks If-None-Match before it writes, not atomically; needs AWS S3, MinIO or R2"]
    fn s3_exactly_one_winner() {
        exactly_one_winner(&s3_backend("exactly_one_winner").store);
    }

    /// What s3s-fs does guarantee, and what the store relies on even where
    /// two writers both win: each loser hears AlreadyExists, and a reader
    /// sees one writer's whole object, never a mix.
    #[test]
    fn s3_never_tears() {
        let store = s3_backend("never_tears").store;
        for round in 0..3 {
            let key = format!("claims/{round}");
            let results = race(&store, &key, |writer| vec![writer as u8; 256 << 10]);
            let winners: Vec<usize> = (0..WRITERS).filter(|&w| results[w].is_ok()).collect();
            assert!(!winners.is_empty(), "round {round}: {results:?}");
            let stored = store.get(&key).unwrap().unwrap();
            assert!(
                winners
                    .iter()
                    .any(|&w| stored[..] == vec![w as u8; 256 << 10][..]),
                "round {round}: the object is no single winner's"
            );
        }
    }

    const WRITERS: usize = 8;

    /// `WRITERS` threads put_new `key` at once, writer `w` writing
    /// `payload(w)`; every result is a win or AlreadyExists.
    fn race(
        store: &Store,
        key: &str,
        payload: impl Fn(usize) -> Vec<u8>,
    ) -> Vec<Result<(), StoreError>> {
        let barrier = Arc::new(Barrier::new(WRITERS));
        let handles: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (store, barrier, key) = (store.clone(), barrier.clone(), key.to_owned());
                let bytes = payload(writer);
                std::thread::spawn(move || {
                    barrier.wait();
                    store.put_new(&key, bytes)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for result in &results {
            assert!(
                matches!(result, Ok(()) | Err(StoreError::AlreadyExists { .. })),
                "{result:?}"
            );
        }
        results
    }

    fn exactly_one_winner(store: &Store) {
        for round in 0..5 {
            let key = format!("claims/{round}");
            let results = race(store, &key, |writer| {
                format!("writer {writer}").into_bytes()
            });
            let winners: Vec<usize> = (0..WRITERS).filter(|&w| results[w].is_ok()).collect();
            assert_eq!(winners.len(), 1, "round {round}: {results:?}");
            assert_eq!(
                store.get(&key).unwrap().as_deref(),
                Some(format!("writer {}", winners[0]).as_bytes())
            );
        }
    }
}

fn one_store_serves_many_threads(store: &Store) {
    let handles: Vec<_> = (0..4u8)
        .map(|worker| {
            let store = store.clone();
            std::thread::spawn(move || {
                let name = format!("w{worker}");
                for seq in 0..10 {
                    let key = layout::chunk_key(&name, seq, "chunk").unwrap();
                    store.put_new(&key, vec![worker; 10]).unwrap();
                    assert_eq!(store.get(&key).unwrap().as_deref(), Some(&[worker; 10][..]));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let listed = store.list_after("games", None, 1000).unwrap();
    let all: HashSet<&str> = keys(&listed).into_iter().collect();
    assert_eq!(all.len(), 40);
}

fn keys_must_be_relative_paths(store: &Store) {
    for key in ["", "/abs", "dir/", "a//b", "a/../b", "./a"] {
        for result in [
            store.put_new(key, &b"x"[..]).map(drop),
            store.get(key).map(drop),
            store.list_after("games", Some(key), 1).map(drop),
        ] {
            let err = result.unwrap_err();
            assert!(
                matches!(err, StoreError::InvalidKey { .. }),
                "{key:?}: {err}"
            );
            assert!(
                err.to_string().contains(&format!("invalid key `{key}`")),
                "{err}"
            );
        }
    }
    assert!(matches!(
        store.list_after("a//b", None, 1),
        Err(StoreError::InvalidKey { .. })
    ));
}

fn nets_are_published_through_the_pointer(store: &Store) {
    assert_eq!(store.latest_net().unwrap(), None);
    let first = store.publish_net(1, &b"weights one"[..]).unwrap();
    assert_eq!(
        first,
        NetPointer {
            step: 1,
            key: "nets/00000001.safetensors".into(),
            crc32: crc32fast::hash(b"weights one"),
        }
    );
    let second = store.publish_net(2, &b"weights two"[..]).unwrap();
    let (pointer, weights) = store.latest_net().unwrap().unwrap();
    assert_eq!(
        (pointer, &weights[..]),
        (second.clone(), &b"weights two"[..])
    );

    // A restarted trainer may publish the same net again; not another one.
    assert_eq!(store.publish_net(2, &b"weights two"[..]).unwrap(), second);
    assert!(matches!(
        store.publish_net(2, &b"other weights"[..]),
        Err(StoreError::AlreadyExists { .. })
    ));

    store.put_pointer(LATEST_NET, &b"not json"[..]).unwrap();
    let err = store.latest_net().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("nets/latest"), "{err}");

    let wrong_crc = serde_json_pointer(2, "nets/00000002.safetensors", second.crc32 ^ 1);
    store.put_pointer(LATEST_NET, wrong_crc).unwrap();
    let err = store.latest_net().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("CRC-32"), "{err}");

    store
        .put_pointer(
            LATEST_NET,
            serde_json_pointer(3, "nets/00000003.safetensors", 0),
        )
        .unwrap();
    let err = store.latest_net().unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("`nets/00000003.safetensors` is missing"),
        "{err}"
    );
}

fn serde_json_pointer(step: u64, key: &str, crc32: u32) -> Vec<u8> {
    format!(r#"{{"step":{step},"key":"{key}","crc32":{crc32}}}"#).into_bytes()
}

#[test]
fn garbage_urls_are_refused_before_any_request() {
    for (url, why) in [
        ("", "empty"),
        ("s3://", "bucket name is missing"),
        ("ftp://host/x", "unknown scheme `ftp://`"),
        ("s3:/bucket/x", "not followed by `//`"),
        ("s3://a b/x", "has the character"),
    ] {
        let err = Store::open(url).unwrap_err();
        assert!(matches!(err, StoreError::InvalidUrl { .. }), "{url}: {err}");
        let message = err.to_string();
        assert!(
            message.contains(why) && message.contains(&format!("`{url}`")),
            "{message}"
        );
    }
}

#[test]
fn a_directory_that_cannot_be_created_is_a_setup_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let url = format!("{}/run", file.display());
    let err = Store::open(&url).unwrap_err();
    assert!(matches!(err, StoreError::Setup { .. }), "{err}");
    assert!(err.to_string().contains("cannot create directory"), "{err}");
}

#[test]
fn s3_unreachable_endpoint_fails_fast_and_names_it() {
    let s3 = TestServer::from_env();
    let endpoint = format!("http://127.0.0.1:{}", closed_port());
    let mut vars = s3.vars();
    vars[0].1 = endpoint.clone();
    let store = s3.open(&s3.fresh_url("unreachable"), vars).unwrap();
    let started = Instant::now();
    for result in [
        store.get("k").map(drop),
        store.put_new("k", &b"x"[..]),
        store.list_after("", None, 1).map(drop),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, StoreError::Unreachable { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains(&endpoint) && message.contains("check AWS_ENDPOINT"),
            "{message}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn s3_wrong_credentials_are_access_denied() {
    let s3 = TestServer::from_env();
    for (index, value) in [(3, "no-such-key"), (4, "wrong-secret")] {
        let mut vars = s3.vars();
        vars[index].1 = value.into();
        let store = s3.open(&s3.fresh_url("credentials"), vars).unwrap();
        for result in [
            store.get("k").map(drop),
            store.put_new("k", &b"x"[..]),
            store.put_pointer("k", &b"x"[..]),
            store.list_after("", None, 1).map(drop),
        ] {
            let err = result.unwrap_err();
            assert!(
                matches!(err, StoreError::AccessDenied { .. }),
                "{value}: {err}"
            );
            assert!(err.to_string().contains("check AWS_ACCESS_KEY_ID"), "{err}");
        }
    }
}

#[test]
fn s3_missing_credentials_say_so() {
    let s3 = TestServer::from_env();
    // No access key: object_store turns to the instance metadata service,
    // here a closed port, as it is off AWS (or a refusing proxy).
    let vars: Vec<_> = s3
        .vars()
        .into_iter()
        .filter(|(name, _)| {
            !name.starts_with("AWS_ACCESS_KEY_ID") && !name.starts_with("AWS_SECRET")
        })
        .chain([(
            "AWS_METADATA_ENDPOINT",
            format!("http://127.0.0.1:{}", closed_port()),
        )])
        .collect();
    let store = s3.open(&s3.fresh_url("no_credentials"), vars).unwrap();
    for result in [
        store.get("k").map(drop),
        store.list_after("", None, 1).map(drop),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, StoreError::NoCredentials { .. }), "{err}");
        assert!(
            err.to_string().contains("AWS_ACCESS_KEY_ID is not set"),
            "{err}"
        );
    }
}

/// Listing is where s3s-fs checks the bucket (its GET answers NoSuchKey, and
/// its PUT creates the bucket); AWS S3 and MinIO answer NoSuchBucket to all,
/// which the store reports the same way.
#[test]
fn s3_missing_bucket_is_named() {
    let s3 = TestServer::from_env();
    let store = s3
        .open("s3://mixzero-no-such-bucket/run", s3.vars())
        .unwrap();
    for result in [
        store.list_after("", None, 1).map(drop),
        store.list_dirs("").map(drop),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, StoreError::NoSuchBucket { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains("bucket `mixzero-no-such-bucket`")
                && message.contains(&s3.endpoint)
                && message.contains("list the whole store"),
            "{message}"
        );
    }
}

/// A port that was just free: nothing listens there.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
