//! A seccomp filter for tests: the system calls a container runtime refuses, refused on one
//! thread and the threads it starts.

// Two `prctl` calls install the filter; the BPF helpers are `unsafe fn`s that build values.
#![allow(unsafe_code)]

/// Installs, on the calling thread only (and the threads it starts from now on), a seccomp
/// filter that fails each of `syscalls` with `EPERM` and allows everything else, as a
/// container runtime's seccomp profile refuses io_uring (tests of the engine fallback). The
/// filter cannot be removed: run it on a thread of its own. Panics if the kernel refuses it.
pub fn refuse_syscalls_on_this_thread(syscalls: &[libc::c_long]) {
    let mut program = Vec::new();
    // SAFETY: `BPF_STMT` and `BPF_JUMP` are `unsafe fn`s that only build a `sock_filter` value.
    unsafe {
        // Load the system call's number (`seccomp_data.nr`, the first 32 bits); the numbers
        // are this target's (one architecture per test binary).
        program.push(libc::BPF_STMT((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0));
        for &nr in syscalls {
            // Equal: fall through to the refusal; else skip it.
            program.push(libc::BPF_JUMP(
                (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                nr as u32,
                0,
                1,
            ));
            program.push(libc::BPF_STMT(
                (libc::BPF_RET | libc::BPF_K) as u16,
                libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
            ));
        }
        program.push(libc::BPF_STMT((libc::BPF_RET | libc::BPF_K) as u16, libc::SECCOMP_RET_ALLOW));
    }
    let fprog = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
    // SAFETY: prctl with these arguments only sets this thread's no-new-privileges bit and
    // copies the filter program, which lives until the call returns. Without
    // SECCOMP_FILTER_FLAG_TSYNC the filter applies to this thread and its future children
    // only, so the test harness's other threads are unaffected.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0, "PR_SET_NO_NEW_PRIVS");
        let rc = libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &fprog as *const libc::sock_fprog as libc::c_ulong,
        );
        assert_eq!(rc, 0, "installing the seccomp filter: {}", std::io::Error::last_os_error());
    }
}
