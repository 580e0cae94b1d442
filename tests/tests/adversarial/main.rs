//! The standing adversarial suite: every attack the security reviews found, replayed against real
//! processes on loopback (a real admin, real executors, real sockets), each asserting the refusal,
//! plus bounded property tests over the parsers that read untrusted input. One module per surface
//! an attacker reaches; docs/security.md lists what each covers.

mod console;
mod child_links;
mod compat_listener;
mod config_flags;
mod first_round;
mod mtls_binding;
mod oracles;
mod support;
