//! memcached's authfile for the text protocol (`memcached -Y FILE`, `ferrite serve
//! --authfile FILE`): lines `user:password`. A connection starts unauthenticated; its first
//! accepted command must be a `set` whose data is `user password` (the key, flags and
//! exptime are ignored, `noreply` too). Replies, as memcached 1.6 gives them:
//!
//! | request | reply |
//! |---|---|
//! | any command but `set`, unauthenticated | `CLIENT_ERROR unauthenticated` |
//! | `set` whose data has no space | `CLIENT_ERROR bad authentication token format` |
//! | `set` with a user and password not in the file | `CLIENT_ERROR authentication failure` |
//! | `set` with a pair in the file | `STORED`; the connection is authenticated |
//!
//! A failed attempt leaves the connection open and unauthenticated.

use std::path::Path;

/// The pairs of an authfile.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // (Never the passwords.)
        write!(f, "Credentials({} users)", self.pairs.len())
    }
}

/// The outcome of an authentication attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    Accepted,
    /// The data is not `user password`.
    BadFormat,
    Refused,
}

impl Credentials {
    /// Reads an authfile: one `user:password` per line (`\n` or `\r\n`; empty lines are
    /// skipped). An unreadable file, a line without `:`, an empty user or no user at all is
    /// an error that names the file and the line.
    pub fn load(path: &Path) -> Result<Credentials, String> {
        let text = std::fs::read(path)
            .map_err(|e| format!("reading the authfile {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("the authfile {}: {e}", path.display()))
    }

    pub fn parse(text: &[u8]) -> Result<Credentials, String> {
        let mut pairs = Vec::new();
        for (number, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                return Err(format!("line {} is not user:password", number + 1));
            };
            let (user, password) = (&line[..colon], &line[colon + 1..]);
            if user.is_empty() {
                return Err(format!("line {} has an empty user", number + 1));
            }
            pairs.push((user.to_vec(), password.to_vec()));
        }
        if pairs.is_empty() {
            return Err("no user:password line".to_owned());
        }
        Ok(Credentials { pairs })
    }

    /// Checks the data of an authenticating `set`: `user password`.
    pub fn check(&self, data: &[u8]) -> Attempt {
        let Some(space) = data.iter().position(|&b| b == b' ') else { return Attempt::BadFormat };
        let (user, password) = (&data[..space], &data[space + 1..]);
        // Every pair is compared in full: the time taken does not tell which matched.
        let mut found = false;
        for (u, p) in &self.pairs {
            found |= same(u, user) & same(p, password);
        }
        if found {
            Attempt::Accepted
        } else {
            Attempt::Refused
        }
    }
}

/// Equal bytes, compared without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut differ = a.len() != b.len();
    for (x, y) in a.iter().zip(b) {
        differ |= x != y;
    }
    !differ
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authfiles_parse_and_check_as_memcached_does() {
        let creds = Credentials::parse(b"alice:secret\r\n\nbob:pw:with:colons\n").unwrap();
        assert_eq!(creds.check(b"alice secret"), Attempt::Accepted);
        assert_eq!(creds.check(b"bob pw:with:colons"), Attempt::Accepted);
        assert_eq!(creds.check(b"alice secreT"), Attempt::Refused);
        assert_eq!(creds.check(b"alice secret "), Attempt::Refused);
        assert_eq!(creds.check(b"carol secret"), Attempt::Refused);
        assert_eq!(creds.check(b"alicesecret"), Attempt::BadFormat);
        assert_eq!(creds.check(b""), Attempt::BadFormat);
        assert_eq!(format!("{creds:?}"), "Credentials(2 users)", "no password shown");
        assert_eq!(
            Credentials::parse(b"a:b\nnocolon\n").unwrap_err(),
            "line 2 is not user:password"
        );
        assert_eq!(Credentials::parse(b":pw\n").unwrap_err(), "line 1 has an empty user");
        assert_eq!(Credentials::parse(b"\n\n").unwrap_err(), "no user:password line");
        let missing = Credentials::load(Path::new("/nonexistent/authfile")).unwrap_err();
        assert!(missing.starts_with("reading the authfile /nonexistent/authfile:"), "{missing}");
    }
}
