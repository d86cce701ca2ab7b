//! What can go wrong, in words a user can act on: every error names the
//! store URL and the key, and the S3 ones say which setting to check.

use std::error::Error as StdError;

use object_store::client::{HttpError, HttpErrorKind};

/// A boxed cause, for the few errors whose cause is not an object_store one.
pub type Source = Box<dyn StdError + Send + Sync + 'static>;

/// Everything [`Store`](crate::Store) can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL is malformed: unknown scheme, no bucket, a bad prefix.
    #[error("invalid store URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },

    /// A key that is not a relative `/`-separated path (empty, `a//b`,
    /// `../x`, a leading or trailing `/`).
    #[error("invalid key `{key}` for store `{url}`: {reason}")]
    InvalidKey {
        url: String,
        key: String,
        reason: String,
    },

    /// The store could not be set up (runtime, directory, S3 settings).
    #[error("cannot open store `{url}`: {what}: {source}")]
    Setup {
        url: String,
        what: String,
        #[source]
        source: Source,
    },

    /// No connection to the endpoint (refused, DNS, timeout), after the
    /// store's few retries.
    #[error(
        "cannot reach {endpoint} for store `{url}` ({what}); check AWS_ENDPOINT and \
         that the server is running: {source}"
    )]
    Unreachable {
        url: String,
        endpoint: String,
        what: String,
        #[source]
        source: Box<object_store::Error>,
    },

    /// AWS_ACCESS_KEY_ID is unset, so object_store asked the instance
    /// metadata service (AWS's fallback), and that gave no credentials: the
    /// usual outcome of forgetting the variables off AWS.
    #[error(
        "no credentials for store `{url}` ({what}): AWS_ACCESS_KEY_ID is not set, and the \
         instance metadata service at {metadata_endpoint} gave none; set AWS_ACCESS_KEY_ID \
         and AWS_SECRET_ACCESS_KEY: {source}"
    )]
    NoCredentials {
        url: String,
        what: String,
        metadata_endpoint: String,
        #[source]
        source: Box<object_store::Error>,
    },

    /// The server refused the credentials or their permissions (401/403).
    #[error(
        "access denied to store `{url}` ({what}); check AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY, and that they may use the bucket: {source}"
    )]
    AccessDenied {
        url: String,
        what: String,
        #[source]
        source: Box<object_store::Error>,
    },

    /// The bucket of an `s3://` URL does not exist on the endpoint.
    #[error(
        "bucket `{bucket}` of store `{url}` does not exist at {endpoint} ({what}); \
         create it, or check the URL and AWS_ENDPOINT: {source}"
    )]
    NoSuchBucket {
        url: String,
        bucket: String,
        endpoint: String,
        what: String,
        #[source]
        source: Box<object_store::Error>,
    },

    /// A create-only put found the key taken (by another writer, or an
    /// earlier run); the object there is unchanged.
    #[error("`{key}` already exists in store `{url}`")]
    AlreadyExists { url: String, key: String },

    /// An object another object refers to is missing.
    #[error("`{key}` is missing from store `{url}` ({why})")]
    NotFound {
        url: String,
        key: String,
        why: String,
    },

    /// An object is there but its contents are wrong.
    #[error("`{key}` in store `{url}` is corrupt: {reason}")]
    Corrupt {
        url: String,
        key: String,
        reason: String,
    },

    /// Anything else object_store reports (local I/O errors, server errors).
    #[error("{what} in store `{url}` failed: {source}")]
    Other {
        url: String,
        what: String,
        #[source]
        source: Box<object_store::Error>,
    },
}

/// What the store knows about its backend, to explain failures.
#[derive(Debug)]
pub(crate) struct Context {
    pub url: String,
    pub s3: Option<S3Context>,
}

#[derive(Debug)]
pub(crate) struct S3Context {
    pub bucket: String,
    /// The endpoint in words: its URL, or AWS's own when AWS_ENDPOINT is unset.
    pub endpoint: String,
    /// Where object_store looks for credentials when AWS_ACCESS_KEY_ID is
    /// unset (None when it is set): a failure that mentions it is about
    /// credentials, not the endpoint.
    pub metadata_endpoint: Option<String>,
}

/// S3 error codes (in response bodies) that mean "your credentials".
/// List requests report them only in the body, not as a typed error.
const AUTH_CODES: [&str; 6] = [
    "InvalidAccessKeyId",
    "NotSignedUp",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "InvalidToken",
    "ExpiredToken",
];

impl Context {
    /// Names the failure of `what` (e.g. "get `nets/latest`"). Callers
    /// handle the outcomes that are answers rather than failures (a missing
    /// object on `get`, a taken key on `put_new`) before calling this.
    pub fn classify(&self, what: String, source: object_store::Error) -> StoreError {
        let url = self.url.clone();
        let source = Box::new(source);
        let Some(s3) = &self.s3 else {
            return StoreError::Other { url, what, source };
        };
        let text = chain_text(&*source);
        if text.contains("NoSuchBucket") {
            return StoreError::NoSuchBucket {
                url,
                bucket: s3.bucket.clone(),
                endpoint: s3.endpoint.clone(),
                what,
                source,
            };
        }
        if let Some(metadata_endpoint) = &s3.metadata_endpoint {
            if text.contains(metadata_endpoint.as_str()) {
                return StoreError::NoCredentials {
                    url,
                    what,
                    metadata_endpoint: metadata_endpoint.clone(),
                    source,
                };
            }
        }
        if is_unreachable(&*source) {
            return StoreError::Unreachable {
                url,
                endpoint: s3.endpoint.clone(),
                what,
                source,
            };
        }
        let denied = matches!(
            *source,
            object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
        ) || AUTH_CODES.iter().any(|code| text.contains(code));
        if denied {
            return StoreError::AccessDenied { url, what, source };
        }
        StoreError::Other { url, what, source }
    }
}

/// Whether a `NotFound` is about the object, not its bucket (S3 answers 404
/// for both; only the body's code tells them apart).
pub(crate) fn object_missing(err: &object_store::Error) -> bool {
    matches!(err, object_store::Error::NotFound { .. }) && !chain_text(err).contains("NoSuchBucket")
}

/// The messages of an error and all its causes, where the S3 error codes of
/// a response body end up.
fn chain_text(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// A request that may or may not have taken effect: sent (perhaps in part),
/// then the connection broke or timed out before the answer. A server that
/// refuses a create-only PUT early (s3s-fs does) closes the connection while
/// the body is still going out, which looks like this too.
pub(crate) fn outcome_unknown(err: &object_store::Error) -> bool {
    http_error_kind(err).is_some_and(|kind| {
        matches!(
            kind,
            HttpErrorKind::Interrupted | HttpErrorKind::Timeout | HttpErrorKind::Request
        )
    })
}

/// A connection that never got an answer: refused, DNS, timed out.
fn is_unreachable(err: &(dyn StdError + 'static)) -> bool {
    http_error_kind(err)
        .is_some_and(|kind| matches!(kind, HttpErrorKind::Connect | HttpErrorKind::Timeout))
}

/// The kind of the transport failure behind an error, if it is one.
fn http_error_kind(err: &(dyn StdError + 'static)) -> Option<HttpErrorKind> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return Some(http.kind());
        }
        cause = e.source();
    }
    None
}
