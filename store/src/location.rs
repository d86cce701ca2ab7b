//! The store URL a user gives: `s3://bucket/prefix`, `file:///path` or a
//! plain directory path.

use std::path::PathBuf;

use crate::StoreError;

/// Where a store lives, parsed from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An S3-compatible bucket; every key lives under `prefix` (no leading or
    /// trailing `/`, empty for the bucket's root).
    S3 { bucket: String, prefix: String },
    /// A local directory (from `file:///path` or a plain path), created on
    /// open if missing.
    Dir(PathBuf),
}

impl Location {
    /// Parses a store URL. Anything of the form `word:` before the first `/`
    /// is taken as a URL, so a typo such as `s3:/bucket` is an error rather
    /// than a directory named `s3:`.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let bad = |reason: String| StoreError::InvalidUrl {
            url: url.to_owned(),
            reason,
        };
        if url.is_empty() {
            return Err(bad("the URL is empty".into()));
        }
        if let Some((scheme, rest)) = url.split_once("://") {
            return match scheme {
                "s3" => parse_s3(rest).map_err(bad),
                "file" => parse_file(url).map_err(bad),
                _ => Err(bad(format!("unknown scheme `{scheme}://`{EXPECTED}"))),
            };
        }
        if let Some((scheme, _)) = url.split_once(':') {
            let word = !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric());
            if word && !scheme.contains('/') {
                return Err(bad(format!(
                    "`{scheme}:` is not followed by `//`{EXPECTED}"
                )));
            }
        }
        Ok(Self::Dir(PathBuf::from(url)))
    }
}

const EXPECTED: &str = "; expected s3://bucket/prefix, file:///path or a directory path";

fn parse_s3(rest: &str) -> Result<Location, String> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!("the bucket name is missing{EXPECTED}"));
    }
    // S3's bucket naming rules, loosely: enough to catch a stray space, `?`
    // or `@` (credentials belong in AWS_* variables, not in the URL).
    if let Some(c) = bucket
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
    {
        return Err(format!(
            "bucket name `{bucket}` has the character `{c}` (letters, digits, `.`, `-`, `_` only; credentials go in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        ));
    }
    let prefix = prefix.trim_matches('/');
    if !prefix.is_empty() {
        object_store::path::Path::parse(prefix)
            .map_err(|e| format!("bad prefix `{prefix}`: {e}"))?;
    }
    Ok(Location::S3 {
        bucket: bucket.to_owned(),
        prefix: prefix.to_owned(),
    })
}

fn parse_file(url: &str) -> Result<Location, String> {
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    parsed
        .to_file_path()
        .map(Location::Dir)
        .map_err(|()| "not a local absolute path (file URLs look like file:///abs/path)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, prefix: &str) -> Location {
        Location::S3 {
            bucket: bucket.into(),
            prefix: prefix.into(),
        }
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(Location::parse("s3://b").unwrap(), s3("b", ""));
        assert_eq!(Location::parse("s3://b/").unwrap(), s3("b", ""));
        assert_eq!(
            Location::parse("s3://b/runs/x/").unwrap(),
            s3("b", "runs/x")
        );
        assert_eq!(
            Location::parse("file:///tmp/a%20b").unwrap(),
            Location::Dir("/tmp/a b".into())
        );
        assert_eq!(
            Location::parse("runs/x").unwrap(),
            Location::Dir("runs/x".into())
        );
        assert_eq!(
            Location::parse("/abs/x:y").unwrap(),
            Location::Dir("/abs/x:y".into())
        );
    }

    #[test]
    fn rejects_garbage_with_the_reason() {
        for (url, why) in [
            ("", "empty"),
            ("s3://", "bucket name is missing"),
            ("s3:///prefix", "bucket name is missing"),
            ("s3://my bucket/x", "character ` `"),
            ("s3://key:secret@b/x", "credentials go in"),
            ("s3://b/a//c", "bad prefix"),
            ("gs://b/x", "unknown scheme `gs://`"),
            ("s3:/b/x", "`s3:` is not followed by `//`"),
            ("file://host/x", "not a local absolute path"),
        ] {
            let err = Location::parse(url).unwrap_err().to_string();
            assert!(err.contains(why), "{url}: {err}");
            assert!(err.contains(&format!("`{url}`")), "{url}: {err}");
        }
    }
}
