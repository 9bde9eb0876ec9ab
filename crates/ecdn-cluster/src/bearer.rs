//! The bearer tokens of the admin listeners (a node's, the coordinator's status page) and of
//! `PURGE`: how a request's token is compared, and which tokens a process takes at start.

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

/// Why an admin token was refused at start.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("the admin token is empty: give one of at least {MIN_ADMIN_TOKEN} bytes")]
    Empty,
    #[error("the admin token has {0} bytes: it needs at least {MIN_ADMIN_TOKEN}")]
    Short(usize),
    #[error(
        "the admin token has a space or control character, which an Authorization header does \
         not carry as is: use visible characters only"
    )]
    Unsendable,
}

/// Whether `token` can guard an admin listener: at least [`MIN_ADMIN_TOKEN`] bytes, none of
/// them whitespace or control characters (HTTP trims the first, and a header cannot carry the
/// others, so a listener with such a token could never be reached).
pub fn check_admin_token(token: &str) -> Result<(), TokenError> {
    if token.is_empty() {
        return Err(TokenError::Empty);
    }
    if token.len() < MIN_ADMIN_TOKEN {
        return Err(TokenError::Short(token.len()));
    }
    if token
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(TokenError::Unsendable);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_tokens_need_sixteen_sendable_bytes() {
        assert_eq!(check_admin_token(""), Err(TokenError::Empty));
        assert_eq!(check_admin_token("short"), Err(TokenError::Short(5)));
        assert_eq!(
            check_admin_token("fifteen-bytes!!"),
            Err(TokenError::Short(15))
        );
        check_admin_token("sixteen-bytes!!!").unwrap();
        for bad in ["sixteen bytes!!!", "sixteen-bytes!!\n", "\tsixteen-bytes!!"] {
            assert_eq!(
                check_admin_token(bad),
                Err(TokenError::Unsendable),
                "{bad:?}"
            );
        }
        // Bytes, not characters: eight two-byte characters are enough.
        check_admin_token("éééééééé").unwrap();
        let e = check_admin_token("").unwrap_err().to_string();
        assert!(e.contains("empty") && e.contains("16"), "{e}");
    }
}
