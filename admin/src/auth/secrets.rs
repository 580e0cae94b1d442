//! API tokens and passwords: generation and hashing.
//!
//! Tokens are 256 random bits from the operating system, so a fast hash (SHA-256) is enough to
//! store them: nobody can guess one, and the hash only protects a stolen database dump.
//! Passwords are chosen by people, so they get a slow, salted hash (argon2id).

use argon2::password_hash::{PasswordHasher, SaltString};
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
/// hash: such a user has no password login).
pub fn verify_password(password: &str, phc: &str) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    argon2::Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
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
}
