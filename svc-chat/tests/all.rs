//! Service tests of svc-chat: the real binary on a temp home, over its unix socket, against
//! the test kit's fake Telegram, with no daemon running (so nothing can be prompted).

mod suite;
