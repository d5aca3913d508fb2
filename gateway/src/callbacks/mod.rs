//! Layer 4, callbacks (docs/ARCHITECTURE.md "Gateway layers"): the consumer of the
//! upstream events — notifications fanned out to their connections ([`fan_out`]) and
//! server→client requests sent to theirs, with the client's answers handed back to the
//! service ([`requests`]); [`consume`] is the loop that reads the event channel.

pub mod consume;
pub mod fan_out;
pub mod requests;
