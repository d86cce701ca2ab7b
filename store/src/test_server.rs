//! The S3 server this workspace's tests run against (s3s-fs on loopback,
//! started by `scripts/test.sh` through `scripts/s3-server.sh`), read from
//! the `MIXZERO_TEST_S3_*` variables that script exports. Point them at any
//! S3-compatible server to run the same tests there.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::{Store, StoreError};

/// The test server's address, bucket and credentials.
pub struct TestServer {
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
}

impl TestServer {
    /// The server's settings. Without them this panics: a silently skipped
    /// S3 test would hide a broken S3 path.
    pub fn from_env() -> TestServer {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!(
                    "{name} is not set: this test needs an S3 server. Run ./scripts/test.sh, \
                     which starts one, or `eval \"$(scripts/s3-server.sh)\"` before cargo test"
                )
            })
        };
        TestServer {
            endpoint: var("MIXZERO_TEST_S3_ENDPOINT"),
            bucket: var("MIXZERO_TEST_S3_BUCKET"),
            access_key: var("MIXZERO_TEST_S3_ACCESS_KEY"),
            secret_key: var("MIXZERO_TEST_S3_SECRET_KEY"),
        }
    }

    /// The `AWS_*` variables a machine of a run would have for this server.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key.clone()),
        ]
    }

    /// A URL in the test bucket under a prefix no other test uses.
    pub fn fresh_url(&self, name: &str) -> String {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("s3://{}/{name}-{}-{nanos}", self.bucket, std::process::id())
    }

    /// Opens `url` with these `vars` (the process environment untouched).
    pub fn open(&self, url: &str, vars: Vec<(&'static str, String)>) -> Result<Store, StoreError> {
        Store::open_with_env(url, vars)
    }
}
