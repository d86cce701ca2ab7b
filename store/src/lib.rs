//! Object storage for runs shared by many machines (issue #13): self-play
//! workers upload game chunks and the trainer publishes nets through one
//! bucket. The same code serves `s3://bucket/prefix` (any S3-compatible
//! server), `file:///path` and plain directories, all through the
//! `object_store` crate, so a single machine's run tests the same path as a
//! cluster's.
//!
//! The rest of the project is synchronous std threads, so [`Store`] is a
//! blocking facade: it owns a one-thread tokio runtime and blocks on each
//! request. Its methods must not be called from inside an async runtime.
//!
//! S3 settings come from the usual environment variables: AWS_ACCESS_KEY_ID,
//! AWS_SECRET_ACCESS_KEY, AWS_REGION (or AWS_DEFAULT_REGION), AWS_ENDPOINT
//! (or AWS_ENDPOINT_URL) for a server other than AWS, and AWS_ALLOW_HTTP=true
//! for a plain-HTTP one. Requests time out and retry on a short leash (see
//! [`Store::open`]) so a wrong endpoint fails in seconds, not minutes.

mod error;
pub mod layout;
mod location;
pub mod test_server;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The byte buffer the store reads into and writes from (re-exported so users
/// need not depend on `bytes` themselves).
pub use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, RetryConfig,
};

use error::{Context, S3Context};
pub use error::{Source, StoreError};
pub use location::Location;

/// Where object_store asks for credentials when AWS_ACCESS_KEY_ID is unset
/// and AWS_METADATA_ENDPOINT does not say otherwise (its default, private).
const DEFAULT_METADATA_ENDPOINT: &str = "http://169.254.169.254";
/// Connect timeout unless AWS_CONNECT_TIMEOUT says otherwise: a LAN or
/// cloud endpoint answers well within it, a wrong one fails fast.
const CONNECT_TIMEOUT: &str = "3s";
/// Whole-request timeout unless AWS_TIMEOUT says otherwise: long enough to
/// move a net of some tens of MB over a slow link.
const REQUEST_TIMEOUT: &str = "120s";
/// Retries of a failed request (5xx, dropped connection): a few, within a
/// few seconds, instead of object_store's 10 over 3 minutes.
const RETRY: RetryConfig = RetryConfig {
    backoff: BackoffConfig {
        init_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(2),
        base: 2.0,
    },
    max_retries: 3,
    retry_timeout: Duration::from_secs(10),
};

/// A store of objects under one URL, addressed by `/`-separated relative
/// keys. Cheap to clone and shareable between threads: clones share one
/// runtime and one connection pool.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    objects: Box<dyn ObjectStore>,
    /// S3 lists in key order, so a listing can stop after `limit` keys; a
    /// directory walk has no order, so it is read whole and sorted.
    ordered_listing: bool,
    runtime: tokio::runtime::Runtime,
    context: Context,
}

/// One object found by [`Store::list_after`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its key, relative to the store URL.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.inner.context.url)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the store at `url` (see [`Location::parse`]), with S3 settings
    /// from the process's AWS_* environment variables. No request is made: a
    /// wrong endpoint, credential or bucket shows up as a typed error on the
    /// first operation. A directory is created if missing.
    ///
    /// For S3, AWS_CONNECT_TIMEOUT and AWS_TIMEOUT override the defaults of
    /// 3 s and 120 s; failed requests are retried at most 3 times within 10 s.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        Self::open_with_env(url, vars)
    }

    /// [`open`](Self::open), reading the AWS_* settings from `vars` instead
    /// of the process environment (other names are ignored), so a caller can
    /// take them from its own configuration, and tests can vary them without
    /// touching the environment other threads share.
    pub fn open_with_env<K, V>(
        url: &str,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, StoreError>
    where
        K: AsRef<str>,
        V: Into<String>,
    {
        Self::open_location(url, Location::parse(url)?, vars)
    }

    /// Opens the directory `dir` as a store, created if missing: for a
    /// path that is not to be read as a URL (a run directory named
    /// `a:b` would be).
    pub fn open_dir(dir: &std::path::Path) -> Result<Self, StoreError> {
        let url = dir.display().to_string();
        let no_vars: [(&str, String); 0] = [];
        Self::open_location(&url, Location::Dir(dir.to_path_buf()), no_vars)
    }

    fn open_location<K, V>(
        url: &str,
        location: Location,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, StoreError>
    where
        K: AsRef<str>,
        V: Into<String>,
    {
        let (objects, ordered_listing, s3) = match location {
            Location::Dir(dir) => (dir_objects(url, &dir)?, false, None),
            Location::S3 { bucket, prefix } => {
                let (objects, context) = open_s3(url, bucket, prefix, vars)?;
                (objects, true, Some(context))
            }
        };
        // A current-thread runtime: whichever caller is blocked in it drives
        // every caller's requests, so threads share one connection pool
        // without a thread of its own.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| setup(url, "cannot start the I/O runtime", e.into()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                objects,
                ordered_listing,
                runtime,
                context: Context {
                    url: url.to_owned(),
                    s3,
                },
            }),
        })
    }

    /// The URL the store was opened with.
    pub fn url(&self) -> &str {
        &self.inner.context.url
    }

    /// Writes `key` only if it does not exist yet ([`StoreError::AlreadyExists`]
    /// otherwise, leaving the object as it was). Of several writers racing for
    /// one key exactly one wins, so workers can claim names without locks.
    /// On S3 this is a conditional PUT (`If-None-Match: *`); on a directory a
    /// hard link of a staged file.
    ///
    /// Such a PUT is not retried blindly, since a retry could find the
    /// writer's own first attempt. When the answer is lost (connection broken
    /// or timed out mid-request), the key is read back instead: holding these
    /// very bytes, the write took effect; other bytes, another writer won;
    /// nothing, the PUT is tried once more.
    pub fn put_new(&self, key: &str, bytes: impl Into<Bytes>) -> Result<(), StoreError> {
        let path = self.path(key)?;
        let bytes = bytes.into();
        let taken = || StoreError::AlreadyExists {
            url: self.url().to_owned(),
            key: key.to_owned(),
        };
        let mut read_back = false;
        loop {
            let opts = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            let put = self
                .inner
                .objects
                .put_opts(&path, bytes.clone().into(), opts);
            let err = match self.inner.runtime.block_on(put) {
                Ok(_) => return Ok(()),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => return Err(taken()),
                Err(e) => e,
            };
            if read_back || !error::outcome_unknown(&err) {
                return Err(self.fail(format!("put `{key}`"), err));
            }
            read_back = true;
            match self.get(key)? {
                Some(there) if there == bytes => return Ok(()),
                Some(_) => return Err(taken()),
                None => {}
            }
        }
    }

    /// Writes `key`, replacing what is there. Readers see either the old or
    /// the new object, never part of one (an S3 PUT is atomic; a directory
    /// write is a rename), which makes small "latest" pointers safe to poll.
    pub fn put_pointer(&self, key: &str, bytes: impl Into<Bytes>) -> Result<(), StoreError> {
        let path = self.path(key)?;
        let objects = &self.inner.objects;
        let put = objects.put(&path, bytes.into().into());
        self.inner
            .runtime
            .block_on(put)
            .map(drop)
            .map_err(|e| self.fail(format!("put `{key}`"), e))
    }

    /// Reads `key`, or `None` if there is no such object.
    pub fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        Ok(self.get_with_time(key)?.map(|(bytes, _)| bytes))
    }

    /// [`get`](Self::get), with the time the object was written as the
    /// server reports it: a reader of chunks measures from it how long
    /// they waited to be read, without clocks written into the data.
    pub fn get_with_time(&self, key: &str) -> Result<Option<(Bytes, SystemTime)>, StoreError> {
        let path = self.path(key)?;
        let objects = &self.inner.objects;
        let read = async {
            let object = objects.get(&path).await?;
            let written = object.meta.last_modified;
            Ok::<_, object_store::Error>((object.bytes().await?, written.into()))
        };
        match self.inner.runtime.block_on(read) {
            Ok(read) => Ok(Some(read)),
            Err(e) if error::object_missing(&e) => Ok(None),
            Err(e) => Err(self.fail(format!("get `{key}`"), e)),
        }
    }

    /// Bytes `range` of `key` (a ranged GET on S3), or `None` if there is no
    /// such object: a reader of many objects reads only their headers this
    /// way. A range past the object's end is an error, so ask for at most
    /// its listed size.
    pub fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Bytes>, StoreError> {
        let path = self.path(key)?;
        let objects = &self.inner.objects;
        match self
            .inner
            .runtime
            .block_on(objects.get_range(&path, range.clone()))
        {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if error::object_missing(&e) => Ok(None),
            Err(e) => Err(self.fail(
                format!("get bytes {}..{} of `{key}`", range.start, range.end),
                e,
            )),
        }
    }

    /// The first `limit` objects under `prefix` (whole segments: `games`
    /// covers `games/a` but not `gamesx`; empty for all) whose keys sort
    /// strictly after `cursor`, in key order. A poller passes the last key
    /// it saw as the next cursor, so it never lists old objects again.
    ///
    /// Keys sort as strings, so the cursor only catches every new object
    /// when keys grow with time within `prefix`: poll each writer's own
    /// prefix (e.g. `games/<worker>`, see [`layout`]), whose numbered keys
    /// do, rather than a shared one, where a slow writer's new key may sort
    /// before the cursor.
    pub fn list_after(
        &self,
        prefix: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let prefix_path = match prefix {
            "" => None,
            p => Some(self.path(p)?),
        };
        let cursor_path = cursor.map(|c| self.path(c)).transpose()?;
        let objects = &self.inner.objects;
        let listing = match &cursor_path {
            Some(c) => objects.list_with_offset(prefix_path.as_ref(), c),
            None => objects.list(prefix_path.as_ref()),
        };
        let entries = listing.map_ok(|meta| Entry {
            key: meta.location.to_string(),
            size: meta.size,
        });
        let listed = if self.inner.ordered_listing {
            self.inner
                .runtime
                .block_on(entries.take(limit).try_collect::<Vec<_>>())
        } else {
            self.inner
                .runtime
                .block_on(entries.try_collect::<Vec<_>>())
                .map(|mut all| {
                    all.sort_unstable_by(|a, b| a.key.cmp(&b.key));
                    all.truncate(limit);
                    all
                })
        };
        listed.map_err(|e| self.fail(list_what(prefix), e))
    }

    /// Every object under `prefix` with the time it was written, as the
    /// server reports it, in key order: for clean-ups by age, which list
    /// once rather than poll.
    pub fn list_with_times(&self, prefix: &str) -> Result<Vec<(Entry, SystemTime)>, StoreError> {
        let prefix_path = match prefix {
            "" => None,
            p => Some(self.path(p)?),
        };
        let listing = self
            .inner
            .objects
            .list(prefix_path.as_ref())
            .map_ok(|meta| {
                let entry = Entry {
                    key: meta.location.to_string(),
                    size: meta.size,
                };
                (entry, SystemTime::from(meta.last_modified))
            });
        let mut all = self
            .inner
            .runtime
            .block_on(listing.try_collect::<Vec<_>>())
            .map_err(|e| self.fail(list_what(prefix), e))?;
        all.sort_unstable_by(|a, b| a.0.key.cmp(&b.0.key));
        Ok(all)
    }

    /// The names of the "directories" right under `prefix` (empty for the
    /// top), sorted: the keys' next segments that have keys below them. A
    /// poller finds the writers here (e.g. the workers under `games`), then
    /// lists each one's prefix with its own cursor.
    pub fn list_dirs(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let listed = self.list_level(prefix)?;
        let mut dirs: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_owned))
            .collect();
        dirs.sort_unstable();
        Ok(dirs)
    }

    /// The objects right under `prefix` (empty for the top), not those in
    /// its "directories", with the time each was written, in key order.
    pub fn list_files(&self, prefix: &str) -> Result<Vec<(Entry, SystemTime)>, StoreError> {
        let mut files: Vec<(Entry, SystemTime)> = self
            .list_level(prefix)?
            .objects
            .into_iter()
            .map(|meta| {
                let entry = Entry {
                    key: meta.location.to_string(),
                    size: meta.size,
                };
                (entry, SystemTime::from(meta.last_modified))
            })
            .collect();
        files.sort_unstable_by(|a, b| a.0.key.cmp(&b.0.key));
        Ok(files)
    }

    /// One level of the key tree under `prefix`: its objects and its
    /// "directories" (S3's listing with the `/` delimiter).
    fn list_level(&self, prefix: &str) -> Result<object_store::ListResult, StoreError> {
        let prefix_path = match prefix {
            "" => None,
            p => Some(self.path(p)?),
        };
        let objects = &self.inner.objects;
        let listing = objects.list_with_delimiter(prefix_path.as_ref());
        self.inner
            .runtime
            .block_on(listing)
            .map_err(|e| self.fail(list_what(prefix), e))
    }

    /// Deletes `key`. Deleting a missing key succeeds, as it does on S3, so
    /// a retried cleanup is harmless.
    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key)?;
        let objects = &self.inner.objects;
        match self.inner.runtime.block_on(objects.delete(&path)) {
            Ok(()) => Ok(()),
            Err(e) if error::object_missing(&e) => Ok(()),
            Err(e) => Err(self.fail(format!("delete `{key}`"), e)),
        }
    }

    /// A key as an object_store path, refusing what would not round-trip:
    /// empty segments, `.`/`..`, leading or trailing `/`.
    fn path(&self, key: &str) -> Result<Path, StoreError> {
        let invalid = |reason: String| StoreError::InvalidKey {
            url: self.url().to_owned(),
            key: key.to_owned(),
            reason,
        };
        if key.is_empty() {
            return Err(invalid("the key is empty".into()));
        }
        if key.starts_with('/') || key.ends_with('/') {
            return Err(invalid("keys neither start nor end with `/`".into()));
        }
        Path::parse(key).map_err(|e| invalid(e.to_string()))
    }

    fn fail(&self, what: String, source: object_store::Error) -> StoreError {
        self.inner.context.classify(what, source)
    }
}

/// A listing in error messages.
fn list_what(prefix: &str) -> String {
    match prefix {
        "" => "list the whole store".to_owned(),
        p => format!("list `{p}`"),
    }
}

fn setup(url: &str, what: &str, source: Source) -> StoreError {
    StoreError::Setup {
        url: url.to_owned(),
        what: what.to_owned(),
        source,
    }
}

fn dir_objects(url: &str, dir: &std::path::Path) -> Result<Box<dyn ObjectStore>, StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        let what = format!("cannot create directory {}", dir.display());
        setup(url, &what, e.into())
    })?;
    // Synced to disk before a put returns, as S3 holds an object durably
    // once it answers: a trainer's games count once they are stored.
    let fs = LocalFileSystem::new_with_prefix(dir)
        .map_err(|e| setup(url, "cannot use the directory", e.into()))?
        .with_fsync(true);
    Ok(Box::new(fs))
}

fn open_s3<K, V>(
    url: &str,
    bucket: String,
    prefix: String,
    vars: impl IntoIterator<Item = (K, V)>,
) -> Result<(Box<dyn ObjectStore>, S3Context), StoreError>
where
    K: AsRef<str>,
    V: Into<String>,
{
    // What AmazonS3Builder::from_env does, over `vars`.
    let mut builder = AmazonS3Builder::new();
    for (name, value) in vars {
        let name = name.as_ref().to_ascii_lowercase();
        if !name.starts_with("aws_") {
            continue;
        }
        if let Ok(key) = name.parse::<AmazonS3ConfigKey>() {
            builder = builder.with_config(key, value);
        }
    }
    let mut builder = builder
        .with_bucket_name(&bucket)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_retry(RETRY);
    for (key, default) in [
        (ClientConfigKey::ConnectTimeout, CONNECT_TIMEOUT),
        (ClientConfigKey::Timeout, REQUEST_TIMEOUT),
    ] {
        let key = AmazonS3ConfigKey::Client(key);
        if builder.get_config_value(&key).is_none() {
            builder = builder.with_config(key, default);
        }
    }
    let endpoint = builder
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .unwrap_or_else(|| "AWS S3 (AWS_ENDPOINT is not set)".to_owned());
    let metadata_endpoint = builder
        .get_config_value(&AmazonS3ConfigKey::AccessKeyId)
        .is_none()
        .then(|| {
            builder
                .get_config_value(&AmazonS3ConfigKey::MetadataEndpoint)
                .unwrap_or_else(|| DEFAULT_METADATA_ENDPOINT.to_owned())
        });
    let s3 = builder.build().map_err(|e| {
        let what = "bad S3 settings; check the AWS_* environment variables";
        setup(url, what, e.into())
    })?;
    let objects: Box<dyn ObjectStore> = if prefix.is_empty() {
        Box::new(s3)
    } else {
        Box::new(PrefixStore::new(s3, prefix))
    };
    let context = S3Context {
        bucket,
        endpoint,
        metadata_endpoint,
    };
    Ok((objects, context))
}
