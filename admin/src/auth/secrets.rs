//! API tokens and passwords: generation and hashing.
//!
//! Tokens are 256 random bits from the operating system, so a fast hash (SHA-256) is enough to
//! store them: nobody can guess one, and the hash only protects a stolen database dump.
//! Passwords are chosen by people, so they get a slow, salted hash (argon2id).

use std::sync::LazyLock;

use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use sha2::{Digest, Sha256};

/// What every token starts with, so leaked ones are easy to recognise (secret scanners).
pub const TOKEN_PREFIX: &str = "xjob_";
/// Characters of a token kept in clear to tell tokens apart in listings.
const SHOWN_PREFIX_CHARS: usize = 12;

/// A new random API token: `xjob_` followed by 64 hex digits.
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(format!("{TOKEN_PREFIX}{}", hex(&bytes)))
}

/// The stored form of a token: its SHA-256, in hex.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// The part of a token shown in listings.
pub fn shown_prefix(token: &str) -> String {
    token.chars().take(SHOWN_PREFIX_CHARS).collect()
}

/// The argon2id PHC string of a password (random salt, the crate's default cost).
pub fn hash_password(password: &str) -> Result<String, String> {
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt).map_err(|error| error.to_string())?;
    let salt = SaltString::encode_b64(&salt).map_err(|error| error.to_string())?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| error.to_string())
}

/// Whether `password` matches a stored argon2id PHC string (false for an empty or malformed
/// hash: such a user has no password login). It costs one argon2 verification in every case:
/// with no usable stored hash, `password` is checked against a stand-in hash of the same
/// parameters, so a login for an unknown user name (or a user without a password) takes as
/// long as one for a real user, and its timing does not tell which names exist.
pub fn verify_password(password: &str, phc: &str) -> bool {
    use argon2::password_hash::PasswordVerifier;
    let stored = PasswordHash::new(phc).ok();
    let usable = stored.is_some();
    let checked = match stored {
        Some(stored) => stored,
        None => match stand_in_hash() {
            Some(stand_in) => stand_in,
            None => return false,
        },
    };
    let matches = argon2::Argon2::default()
        .verify_password(password.as_bytes(), &checked)
        .is_ok();
    matches && usable
}

/// The hash verified when there is no usable stored one: made like [`hash_password`]'s (same
/// algorithm and parameters), of a password that is never compared as a match (a login
/// against it fails whatever was typed). `None` only if argon2 refused its own defaults.
fn stand_in_hash() -> Option<PasswordHash<'static>> {
    static STAND_IN: LazyLock<String> = LazyLock::new(|| {
        let salt = SaltString::encode_b64(b"xjob stand-in").map_err(|error| error.to_string());
        salt.and_then(|salt| {
            argon2::Argon2::default()
                .hash_password(b"stand-in", &salt)
                .map(|hash| hash.to_string())
                .map_err(|error| error.to_string())
        })
        .unwrap_or_default()
    });
    PasswordHash::new(&STAND_IN).ok()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_hashed_stably() {
        let first = generate_token().unwrap();
        let second = generate_token().unwrap();
        assert_ne!(first, second);
        assert!(first.starts_with(TOKEN_PREFIX) && first.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(hash_token(&first), hash_token(&first));
        assert_ne!(hash_token(&first), hash_token(&second));
        assert_eq!(shown_prefix(&first).len(), 12);
    }

    #[test]
    fn passwords_hash_with_argon2id_and_a_salt() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert_ne!(hash, hash_password("correct horse").unwrap());
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
        assert!(!verify_password("", ""));
    }

    #[test]
    fn a_missing_hash_is_verified_against_a_stand_in_of_the_same_cost() {
        let real = hash_password("correct horse").unwrap();
        let real = PasswordHash::new(&real).unwrap();
        let stand_in = stand_in_hash().expect("a stand-in hash");
        assert_eq!(stand_in.algorithm, real.algorithm);
        assert_eq!(stand_in.version, real.version);
        assert_eq!(stand_in.params, real.params);
        assert_eq!(
            stand_in.hash.map(|hash| hash.len()),
            real.hash.map(|hash| hash.len())
        );
        // And nothing logs in against it, not even its own password.
        assert!(!verify_password("stand-in", ""));
        assert!(!verify_password("stand-in", "not a PHC string"));
    }
}
