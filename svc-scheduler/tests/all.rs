//! Service tests of svc-scheduler: the real binary on a temp home, over its unix socket, with
//! a fake svc-session served by the test (STYLE.md "Tests").

mod suite;
