//! Image references (`[registry/]repository[:tag][@digest]`) read without a
//! regular expression.
//!
//! `oci-client`'s `Reference` parses with one large regular expression,
//! compiled on first use and kept for the life of the process: its
//! compilation alone allocates about 16 MB (the bounded Unicode repetition
//! of the tag), which the allocator keeps as resident memory after it is
//! freed. Every AgentDeployment pass that records a revision reads the
//! image's digest, so that compilation used to happen in every process,
//! `spec.imagePolicy` or not. [`ImageRef::parse`] accepts the same grammar
//! (the distribution project's reference grammar, as `oci-client` applies it:
//! same registry defaulting to `docker.io`, same `library/` prefix, same
//! digest length checks), by hand; a unit test compares both on a corpus.
//! Differences: a tag here is ASCII (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`),
//! where the regular expression also admits Unicode word characters.

use oci_client::Reference;

/// The registry of a reference that names none (Docker Hub).
const DOCKER_HUB: &str = "docker.io";
/// Docker Hub's legacy name, read as [`DOCKER_HUB`].
const DOCKER_HUB_LEGACY: &str = "index.docker.io";
/// The host that serves Docker Hub's registry API.
const DOCKER_HUB_HOST: &str = "index.docker.io";
/// The tag of a reference that names neither a tag nor a digest.
const DEFAULT_TAG: &str = "latest";
/// The longest repository name accepted, in bytes.
const NAME_MAX: usize = 255;
/// The longest tag accepted, in bytes.
const TAG_MAX: usize = 128;

/// One image reference, split and normalized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// The registry host (and port); `docker.io` when the reference names
    /// none.
    pub registry: String,
    /// The repository path (`library/<name>` for a one-part Docker Hub name).
    pub repository: String,
    /// The tag; `latest` when the reference names neither a tag nor a
    /// digest.
    pub tag: Option<String>,
    /// The digest (`<algorithm>:<hex>`), if the reference names one.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `image`.
    ///
    /// Errors: a reason, in the words of `oci-client`'s own parse errors
    /// ("invalid reference format", "invalid checksum digest length"...),
    /// when `image` is not a reference.
    pub fn parse(image: &str) -> Result<Self, &'static str> {
        if image.is_empty() {
            return Err("repository name must have at least one component");
        }
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (image, None),
        };
        // A tag follows the last `:` after the last `/` (a `:` before it is
        // the registry's port).
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[slash..].rfind(':') {
            Some(i) => (&rest[..slash + i], Some(&rest[slash + i + 1..])),
            None => (rest, None),
        };
        if !valid_name(name)
            || tag.is_some_and(|t| !valid_tag(t))
            || digest.is_some_and(|d| !valid_digest_form(d))
        {
            return Err("invalid reference format");
        }
        let (registry, repository) = split_registry(name);
        if repository.len() > NAME_MAX {
            return Err("repository name must not be more than 255 characters");
        }
        if let Some(d) = digest {
            let want = match d.split_once(':') {
                Some(("sha256", _)) => 64,
                Some(("sha384", _)) => 96,
                Some(("sha512", _)) => 128,
                Some(_) => return Err("unsupported digest algorithm"),
                None => return Err("invalid checksum digest format"),
            };
            if d.split_once(':').map_or(0, |(_, hex)| hex.len()) != want {
                return Err("invalid checksum digest length");
            }
        }
        let tag = match (tag, digest) {
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            (t, _) => t.map(str::to_owned),
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest: digest.map(str::to_owned),
        })
    }

    /// The host the registry API is served from: [`Self::registry`], except
    /// Docker Hub's (`index.docker.io`).
    pub fn request_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_HOST
        } else {
            &self.registry
        }
    }

    /// The same reference as `oci-client`'s type, built from its parts (no
    /// regular expression).
    pub fn to_oci(&self) -> Reference {
        let (registry, repository) = (self.registry.clone(), self.repository.clone());
        match (&self.tag, &self.digest) {
            (Some(tag), Some(digest)) => {
                Reference::with_tag_and_digest(registry, repository, tag.clone(), digest.clone())
            }
            (None, Some(digest)) => Reference::with_digest(registry, repository, digest.clone()),
            (tag, None) => Reference::with_tag(
                registry,
                repository,
                tag.clone().unwrap_or_else(|| DEFAULT_TAG.to_owned()),
            ),
        }
    }
}

/// `[domain/]component(/component)*`: with a first part that is a domain
/// when it can be one, else all path components.
fn valid_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    let all_paths = |p: &[&str]| !p.is_empty() && p.iter().all(|c| valid_path_component(c));
    all_paths(&parts) || (parts.len() > 1 && valid_domain(parts[0]) && all_paths(&parts[1..]))
}

/// `[a-z0-9]+` runs joined by one `.`, one `_`, two `_`, or any number of
/// `-`.
fn valid_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `label(.label)*[:port]`, a label being ASCII letters, digits and inner
/// `-`.
fn valid_domain(d: &str) -> bool {
    let (host, port) = match d.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (d, None),
    };
    let label = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
    };
    host.split('.').all(label)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|x| x.is_ascii_digit()))
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    let word = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    !b.is_empty()
        && b.len() <= TAG_MAX
        && word(b[0])
        && b.iter().all(|x| word(*x) || *x == b'.' || *x == b'-')
}

/// `algorithm:hex`, hex at least 32 long, the algorithm
/// `[A-Za-z][A-Za-z0-9]*` parts joined by one of `-_+.`.
fn valid_digest_form(d: &str) -> bool {
    let Some((algorithm, hex)) = d.split_once(':') else {
        return false;
    };
    let part = |p: &str| {
        let b = p.as_bytes();
        !b.is_empty() && b[0].is_ascii_alphabetic() && b.iter().all(u8::is_ascii_alphanumeric)
    };
    hex.len() >= 32
        && hex.bytes().all(|x| x.is_ascii_hexdigit())
        && algorithm.split(['-', '_', '+', '.']).all(part)
}

/// The registry and repository of a valid name: the first part is the
/// registry when it has a `.` or a `:` or is `localhost`, else Docker Hub;
/// a one-part Docker Hub repository is an official one (`library/`).
fn split_registry(name: &str) -> (String, String) {
    let (mut registry, repository) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_owned(), rest.to_owned())
        }
        _ => (DOCKER_HUB.to_owned(), name.to_owned()),
    };
    if registry == DOCKER_HUB_LEGACY {
        registry = DOCKER_HUB.to_owned();
    }
    let repository = if registry == DOCKER_HUB && !repository.contains('/') {
        format!("library/{repository}")
    } else {
        repository
    };
    (registry, repository)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA256: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// Asserts that `ImageRef::parse` accepts and splits `image` as
    /// `oci-client`'s parser does, or refuses it with the same message.
    fn assert_parses_as_oci_client(image: &str) {
        let ours = ImageRef::parse(image);
        let theirs = image.parse::<Reference>();
        match (&ours, &theirs) {
            (Ok(o), Ok(t)) => {
                assert_eq!(o.registry, t.registry(), "{image}");
                assert_eq!(o.repository, t.repository(), "{image}");
                assert_eq!(o.tag.as_deref(), t.tag(), "{image}");
                assert_eq!(o.digest.as_deref(), t.digest(), "{image}");
                assert_eq!(o.request_host(), t.resolve_registry(), "{image}");
                assert_eq!(o.to_oci().whole(), t.whole(), "{image}");
            }
            (Err(o), Err(t)) => assert_eq!(*o, t.to_string(), "{image}"),
            _ => panic!("{image}: ours {ours:?}, oci-client's {theirs:?}"),
        }
    }

    /// Registries, repositories and tags, valid and invalid, parse as
    /// `oci-client`'s parser does.
    #[test]
    fn names_and_tags_parse_as_oci_client_does() {
        for image in [
            "nginx",
            "nginx:1.27",
            "library/nginx",
            "acme/agent:v1",
            "docker.io/acme/agent",
            "index.docker.io/acme/agent:v2",
            "index.docker.io/agent",
            "ghcr.io/acme/agent:v1",
            "ghcr.io/acme/team/agent:v1.2.3-rc_1",
            "localhost/agent",
            "localhost:5000/agent:dev",
            "127.0.0.1:9/acme/agent:v1",
            "registry-1.example.com:443/a/b/c",
            "host:5000",
            "my-host/agent",
            "a_b/agent",
            "a__b/c---d/e.f",
            "a___b/agent",
            "a..b/agent",
            "a._b/agent",
            "-a/agent",
            "a-/agent",
            "Acme/agent",
            "ghcr.io/Acme/agent",
            "ghcr.io/acme/agent:",
            "ghcr.io/acme/agent:-v1",
            "ghcr.io/acme/agent:.v1",
            "ghcr.io/acme/agent:_v1",
            "ghcr.io/acme//agent",
            "ghcr.io/",
            "/agent",
            "agent/",
            "ghcr.io:/agent",
            "ghcr.io:x/agent",
            "-ghcr.io/agent",
            "ghcr-.io/agent",
            "not an image",
            "ghcr.io/acme/agent@",
            "ghcr.io/acme/agent@sha256",
            "ghcr.io/acme/agent@sha256:xyz",
            "ghcr.io/acme/agent@@sha256:00",
            "UPPER",
            "",
        ] {
            assert_parses_as_oci_client(image);
        }
    }

    /// Digests (of every algorithm and shape, valid and invalid) and the
    /// length limits of repositories and tags parse as `oci-client`'s
    /// parser does.
    #[test]
    fn digests_and_lengths_parse_as_oci_client_does() {
        let long_repo = format!("ghcr.io/{}", "a".repeat(256));
        let long_tag = format!("acme/agent:{}", "t".repeat(129));
        let max_tag = format!("acme/agent:{}", "t".repeat(128));
        let sha384 = format!("sha384:{}", "a".repeat(96));
        let sha512 = format!("sha512:{}", "b".repeat(128));
        let short = format!("sha256:{}", "c".repeat(40));
        let md5 = format!("md5:{}", "d".repeat(32));
        for image in [
            format!("ghcr.io/acme/agent@{SHA256}"),
            format!("ghcr.io/acme/agent:v1@{SHA256}"),
            format!("nginx@{SHA256}"),
            format!("localhost:5000/agent:v1@{SHA256}"),
            format!("ghcr.io/acme/agent@{sha384}"),
            format!("ghcr.io/acme/agent@{sha512}"),
            format!("ghcr.io/acme/agent@{short}"),
            format!("ghcr.io/acme/agent@{md5}"),
            format!("ghcr.io/acme/agent@SHA256:{}", "e".repeat(64)),
            format!("ghcr.io/acme/agent@sha+256.x_y-z:{}", "e".repeat(64)),
            format!("ghcr.io/acme/agent@sha256:{}", "E".repeat(64)),
            long_repo,
            long_tag,
            max_tag,
        ] {
            assert_parses_as_oci_client(&image);
        }
    }
}
