//! The system's CA store, for TLS client files that name no trust store.
//!
//! Why: a Java client reaches Confluent Cloud, MSK and most managed Kafkas over
//! `SASL_SSL` with no `ssl.truststore.*` at all, because the JVM trusts the public CAs.
//! eosmirror's librdkafka is built with a vendored OpenSSL whose compiled-in CA paths
//! point at its own build directory, not at the system's store, so the same file would
//! trust nothing. librdkafka's `ssl.ca.location=probe` does not help either: it checks
//! fixed paths first and ignores `SSL_CERT_FILE` whenever a system bundle exists. So
//! eosmirror looks the store up itself, in the order OpenSSL users expect
//! (`SSL_CERT_FILE`, `SSL_CERT_DIR`, then the distributions' bundle paths), and sets
//! `ssl.ca.location` to what it found.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// One place a distribution keeps its CA certificates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Candidate {
    /// A PEM bundle file.
    File(&'static str),
    /// A directory of hashed certificate files (`c_rehash` / `update-ca-certificates`).
    Dir(&'static str),
}

/// The distributions' CA stores, most common first.
pub(crate) const DISTRIBUTION_STORES: &[Candidate] = &[
    // Debian, Ubuntu (and Gentoo, Arch).
    Candidate::File("/etc/ssl/certs/ca-certificates.crt"),
    // RHEL, Fedora, CentOS.
    Candidate::File("/etc/pki/tls/certs/ca-bundle.crt"),
    // openSUSE.
    Candidate::File("/etc/ssl/ca-bundle.pem"),
    // Alpine, macOS.
    Candidate::File("/etc/ssl/cert.pem"),
    // RHEL 7+ / Fedora's extracted bundle.
    Candidate::File("/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"),
    // Hashed certificates, where no bundle file exists.
    Candidate::Dir("/etc/ssl/certs"),
];

/// Where the lookup looks: the two environment variables and the candidate paths.
///
/// Why a value: tests inject their own environment and temp paths instead of mutating
/// the process environment, which tests running in parallel share.
#[derive(Clone, Debug)]
pub(crate) struct Lookup<'a> {
    /// `SSL_CERT_FILE`: a PEM file of trusted CAs.
    pub(crate) cert_file: Option<OsString>,
    /// `SSL_CERT_DIR`: directories of hashed certificates, `:`-separated as in OpenSSL.
    pub(crate) cert_dir: Option<OsString>,
    /// Tried in order when neither variable is set.
    pub(crate) candidates: &'a [Candidate],
}

impl Lookup<'static> {
    /// This process's environment and the distributions' paths.
    pub(crate) fn from_process() -> Lookup<'static> {
        Lookup {
            cert_file: std::env::var_os("SSL_CERT_FILE"),
            cert_dir: std::env::var_os("SSL_CERT_DIR"),
            candidates: DISTRIBUTION_STORES,
        }
    }
}

/// Where the store was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOrigin {
    /// The `SSL_CERT_FILE` environment variable.
    CertFile,
    /// The `SSL_CERT_DIR` environment variable.
    CertDir,
    /// One of the distributions' usual paths.
    Distribution,
}

/// The system CA store chosen for a client that names no trust store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemStore {
    /// A PEM bundle or a directory of hashed certificates, given to `ssl.ca.location`.
    pub path: PathBuf,
    /// How it was chosen.
    pub origin: StoreOrigin,
}

impl fmt::Display for SystemStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from = match self.origin {
            StoreOrigin::CertFile => "from SSL_CERT_FILE",
            StoreOrigin::CertDir => "from SSL_CERT_DIR",
            StoreOrigin::Distribution => "the distribution's CA store",
        };
        write!(f, "{} ({from})", self.path.display())
    }
}

/// Why no system CA store can be used. Messages name paths only, and the fixes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SystemTrustError {
    /// `SSL_CERT_FILE` is set but names no readable, non-empty file. Not skipped: the
    /// user asked for that file, and silently trusting another store instead would trust
    /// more than intended.
    #[error("SSL_CERT_FILE={} is not a readable, non-empty file", .0.display())]
    CertFileUnusable(PathBuf),
    /// `SSL_CERT_DIR` is set but none of its entries is a readable directory.
    #[error("SSL_CERT_DIR={} names no readable directory", .0.to_string_lossy())]
    CertDirUnusable(OsString),
    /// Neither variable is set and no distribution store exists.
    #[error(
        "no system CA store was found (SSL_CERT_FILE and SSL_CERT_DIR are not set{})",
        none_of(tried)
    )]
    NotFound {
        /// The paths looked at, in order.
        tried: Vec<PathBuf>,
    },
}

/// `, and none of A, B exists`, or nothing when no path was tried.
fn none_of(tried: &[PathBuf]) -> String {
    if tried.is_empty() {
        return String::new();
    }
    let paths: Vec<_> = tried.iter().map(|p| p.display().to_string()).collect();
    format!(", and none of {} exists", paths.join(", "))
}

/// Finds the CA store to trust: `SSL_CERT_FILE` if set, else `SSL_CERT_DIR` if set, else
/// the first usable path of `lookup.candidates`. An empty variable counts as unset.
pub(crate) fn find(lookup: &Lookup<'_>) -> Result<SystemStore, SystemTrustError> {
    if let Some(file) = lookup.cert_file.as_ref().filter(|v| !v.is_empty()) {
        let path = PathBuf::from(file);
        return if usable_file(&path) {
            Ok(SystemStore {
                path,
                origin: StoreOrigin::CertFile,
            })
        } else {
            Err(SystemTrustError::CertFileUnusable(path))
        };
    }
    if let Some(dirs) = lookup.cert_dir.as_ref().filter(|v| !v.is_empty()) {
        // librdkafka takes one directory; OpenSSL's list is searched in order, so the
        // first usable one is the closest match.
        return std::env::split_paths(dirs)
            .find(|dir| usable_dir(dir))
            .map(|path| SystemStore {
                path,
                origin: StoreOrigin::CertDir,
            })
            .ok_or_else(|| SystemTrustError::CertDirUnusable(dirs.clone()));
    }
    for candidate in lookup.candidates {
        let found = match *candidate {
            Candidate::File(path) => usable_file(Path::new(path)).then_some(path),
            Candidate::Dir(path) => usable_dir(Path::new(path)).then_some(path),
        };
        if let Some(path) = found {
            return Ok(SystemStore {
                path: PathBuf::from(path),
                origin: StoreOrigin::Distribution,
            });
        }
    }
    Err(SystemTrustError::NotFound {
        tried: lookup
            .candidates
            .iter()
            .map(|c| match *c {
                Candidate::File(p) | Candidate::Dir(p) => PathBuf::from(p),
            })
            .collect(),
    })
}

/// A regular file (symlinks followed) that can be opened and is not empty: an empty
/// bundle, left by a broken package install, would trust nothing.
fn usable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0)
        && std::fs::File::open(path).is_ok()
}

/// A directory that can be listed.
fn usable_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir()) && std::fs::read_dir(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temp dir with a bundle file, an empty file and a certificate directory, and
    /// `'static` candidate paths into it (leaked: a few bytes per test).
    struct Fixture {
        _dir: tempfile::TempDir,
        bundle: &'static str,
        other_bundle: &'static str,
        empty: &'static str,
        certs: &'static str,
        missing: &'static str,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let leak = |name: &str| -> &'static str {
            Box::leak(dir.path().join(name).display().to_string().into_boxed_str())
        };
        let f = Fixture {
            bundle: leak("bundle.pem"),
            other_bundle: leak("other.pem"),
            empty: leak("empty.pem"),
            certs: leak("certs"),
            missing: leak("missing.pem"),
            _dir: dir,
        };
        std::fs::write(f.bundle, "-----BEGIN CERTIFICATE-----\n").unwrap();
        std::fs::write(f.other_bundle, "-----BEGIN CERTIFICATE-----\n").unwrap();
        std::fs::write(f.empty, "").unwrap();
        std::fs::create_dir(f.certs).unwrap();
        f
    }

    fn lookup<'a>(
        cert_file: Option<&str>,
        cert_dir: Option<&str>,
        candidates: &'a [Candidate],
    ) -> Lookup<'a> {
        Lookup {
            cert_file: cert_file.map(OsString::from),
            cert_dir: cert_dir.map(OsString::from),
            candidates,
        }
    }

    fn store(path: &str, origin: StoreOrigin) -> Result<SystemStore, SystemTrustError> {
        Ok(SystemStore {
            path: PathBuf::from(path),
            origin,
        })
    }

    #[test]
    fn cert_file_comes_first() {
        let f = fixture();
        let candidates = [Candidate::File(f.other_bundle)];
        assert_eq!(
            find(&lookup(Some(f.bundle), Some(f.certs), &candidates)),
            store(f.bundle, StoreOrigin::CertFile)
        );
    }

    #[test]
    fn cert_dir_comes_before_the_distribution_paths() {
        let f = fixture();
        let candidates = [Candidate::File(f.bundle)];
        assert_eq!(
            find(&lookup(None, Some(f.certs), &candidates)),
            store(f.certs, StoreOrigin::CertDir)
        );
        // OpenSSL's `:` list: the first usable directory.
        let list = format!("{}:{}", f.missing, f.certs);
        assert_eq!(
            find(&lookup(None, Some(&list), &candidates)),
            store(f.certs, StoreOrigin::CertDir)
        );
    }

    #[test]
    fn distribution_paths_in_order_skipping_missing_empty_and_wrong_kind() {
        let f = fixture();
        let candidates = [
            Candidate::File(f.missing),
            Candidate::File(f.empty),
            Candidate::File(f.certs), // a directory where a bundle file is expected
            Candidate::Dir(f.bundle), // a file where a directory is expected
            Candidate::File(f.other_bundle),
            Candidate::File(f.bundle),
            Candidate::Dir(f.certs),
        ];
        assert_eq!(
            find(&lookup(None, None, &candidates)),
            store(f.other_bundle, StoreOrigin::Distribution)
        );
        assert_eq!(
            find(&lookup(
                None,
                None,
                &[Candidate::File(f.missing), Candidate::Dir(f.certs)]
            )),
            store(f.certs, StoreOrigin::Distribution)
        );
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let f = fixture();
        let candidates = [Candidate::File(f.bundle)];
        assert_eq!(
            find(&lookup(Some(""), Some(""), &candidates)),
            store(f.bundle, StoreOrigin::Distribution)
        );
    }

    #[test]
    fn a_variable_naming_nothing_usable_is_an_error_not_a_fallback() {
        let f = fixture();
        let candidates = [Candidate::File(f.bundle)];
        for bad in [f.missing, f.empty, f.certs] {
            let e = find(&lookup(Some(bad), None, &candidates)).unwrap_err();
            assert_eq!(e, SystemTrustError::CertFileUnusable(bad.into()));
            assert!(
                e.to_string().starts_with(&format!("SSL_CERT_FILE={bad} ")),
                "{e}"
            );
        }
        let e = find(&lookup(None, Some(f.missing), &candidates)).unwrap_err();
        assert_eq!(e, SystemTrustError::CertDirUnusable(f.missing.into()));
        assert!(e.to_string().contains("SSL_CERT_DIR="), "{e}");
    }

    #[test]
    fn nothing_found_names_every_path_tried() {
        let f = fixture();
        let candidates = [Candidate::File(f.missing), Candidate::Dir(f.empty)];
        let e = find(&lookup(None, None, &candidates)).unwrap_err();
        assert_eq!(
            e,
            SystemTrustError::NotFound {
                tried: vec![f.missing.into(), f.empty.into()]
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("none of {}, {} exists", f.missing, f.empty)),
            "{msg}"
        );
    }

    #[test]
    fn the_distribution_list_follows_the_documented_order() {
        assert_eq!(
            DISTRIBUTION_STORES.first(),
            Some(&Candidate::File("/etc/ssl/certs/ca-certificates.crt"))
        );
        assert_eq!(
            DISTRIBUTION_STORES.last(),
            Some(&Candidate::Dir("/etc/ssl/certs"))
        );
    }

    #[test]
    fn display_names_path_and_origin() {
        let s = SystemStore {
            path: "/etc/ssl/cert.pem".into(),
            origin: StoreOrigin::Distribution,
        };
        assert_eq!(
            s.to_string(),
            "/etc/ssl/cert.pem (the distribution's CA store)"
        );
        let s = SystemStore {
            path: "/x/ca.pem".into(),
            origin: StoreOrigin::CertFile,
        };
        assert_eq!(s.to_string(), "/x/ca.pem (from SSL_CERT_FILE)");
    }
}
