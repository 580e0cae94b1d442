//! The standing adversarial suite: every attack the security reviews found, replayed against real
//! processes on loopback (a real admin, real executors, real sockets), each asserting the refusal,
//! plus bounded property tests over the parsers that read untrusted input. One module per surface
//! an attacker reaches; docs/security.md lists what each covers.

mod accept;
mod attacker;
mod child_links;
mod compat_listener;
mod config_flags;
mod console;
mod executor_calls;
mod first_round;
mod floods;
mod fuzz;
mod group_tokens;
mod mtls_binding;
mod oracles;
mod oversized;
mod ssrf;
mod support;
