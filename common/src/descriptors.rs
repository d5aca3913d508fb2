//! The process's descriptor limit (`RLIMIT_NOFILE`): raised to its hard maximum by a
//! process that holds many sockets (the gateway before authentication, issue 37 §3; the
//! pre-authentication flood of `snowpea-bench`).

/// Raises this process's soft descriptor limit to its hard limit and returns the soft limit
/// now in force (`None` where it cannot be read).
pub fn raise_to_hard_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    Some(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_limit_is_read_and_at_its_hard_maximum_after() {
        let soft = super::raise_to_hard_limit().expect("readable");
        assert!(soft > 0);
        assert_eq!(super::raise_to_hard_limit(), Some(soft));
    }
}
