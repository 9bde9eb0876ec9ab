//! The bearer tokens of the admin listeners (a node's, the coordinator's status page) and of
//! `PURGE`: how a request's token is compared, and which tokens a process takes at start (the
//! same rule for every token: [`check_token`]).

use thiserror::Error;

/// Whether two byte strings are equal, in time independent of where they differ (only the
/// length may show): for comparing secrets such as bearer tokens.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Whether an `Authorization` header value is `Bearer <token>`, comparing the token in constant
/// time (only the length may show): the admin listeners' and `PURGE`'s check.
pub fn bearer_matches(header: Option<&[u8]>, token: &str) -> bool {
    let Some(h) = header else {
        return false;
    };
    let Some(given) = h
        .strip_prefix(b"Bearer ")
        .or_else(|| h.strip_prefix(b"bearer "))
    else {
        return false;
    };
    constant_time_eq(given, token.as_bytes())
}

/// The fewest bytes an admin token may have: 16 random bytes are 128 bits, beyond guessing
/// over the network. The token is all that stands between the network and an admin listener
/// (stats, metrics, `PURGE`, the status page's data), and an empty one cannot even be sent
/// (`Authorization: Bearer ` loses its trailing space on the way), so such a listener would
/// answer `401` to everyone.
pub const MIN_ADMIN_TOKEN: usize = 16;

/// Why a token was refused at start.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the {0} token is empty: give one of at least {MIN_ADMIN_TOKEN} bytes")]
    Empty(&'static str),
    #[error("the {0} token has {1} bytes: it needs at least {MIN_ADMIN_TOKEN}")]
    Short(&'static str, usize),
    #[error(
        "the {0} token has a space or control character, which an Authorization header does \
         not carry as is: use visible characters only"
    )]
    Unsendable(&'static str),
}

/// Whether `token` can guard an admin listener: at least [`MIN_ADMIN_TOKEN`] bytes, none of
/// them whitespace or control characters (HTTP trims the first, and a header cannot carry the
/// others, so a listener with such a token could never be reached).
pub fn check_admin_token(token: &str) -> Result<(), TokenError> {
    check_token("admin", token)
}

/// Whether `token` can authorize `PURGE` on the client listener: the admin token's rule
/// ([`check_admin_token`]). A purge empties the cache of an object for every client, and the
/// client listener faces the Internet: a short token there can be guessed.
pub fn check_purge_token(token: &str) -> Result<(), TokenError> {
    check_token("purge", token)
}

/// The rule every bearer token passes at start: at least [`MIN_ADMIN_TOKEN`] bytes, none of
/// them whitespace or control characters; `what` names the token in the error.
pub fn check_token(what: &'static str, token: &str) -> Result<(), TokenError> {
    if token.is_empty() {
        return Err(TokenError::Empty(what));
    }
    if token.len() < MIN_ADMIN_TOKEN {
        return Err(TokenError::Short(what, token.len()));
    }
    if token
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(TokenError::Unsendable(what));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_tokens_need_sixteen_sendable_bytes() {
        assert_eq!(check_admin_token(""), Err(TokenError::Empty("admin")));
        assert_eq!(
            check_admin_token("short"),
            Err(TokenError::Short("admin", 5))
        );
        assert_eq!(
            check_admin_token("fifteen-bytes!!"),
            Err(TokenError::Short("admin", 15))
        );
        check_admin_token("sixteen-bytes!!!").unwrap();
        for bad in ["sixteen bytes!!!", "sixteen-bytes!!\n", "\tsixteen-bytes!!"] {
            assert_eq!(
                check_admin_token(bad),
                Err(TokenError::Unsendable("admin")),
                "{bad:?}"
            );
        }
        // Bytes, not characters: eight two-byte characters are enough.
        check_admin_token("éééééééé").unwrap();
        let e = check_admin_token("").unwrap_err().to_string();
        assert!(e.contains("empty") && e.contains("16"), "{e}");
    }

    #[test]
    fn purge_tokens_follow_the_admin_tokens_rule() {
        assert_eq!(check_purge_token("t"), Err(TokenError::Short("purge", 1)));
        assert_eq!(check_purge_token(""), Err(TokenError::Empty("purge")));
        check_purge_token("sixteen-bytes!!!").unwrap();
        let e = check_purge_token("s3cret").unwrap_err().to_string();
        assert!(e.contains("purge token") && e.contains("16"), "{e}");
    }
}
