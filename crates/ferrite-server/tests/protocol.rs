//! The memcached protocol decoder and reply writer against memcached 1.6's behaviour: every
//! command and meta flag, the error replies, pipelining, requests split at every byte,
//! hostile input, and a seeded random run of the fuzz body.

use ferrite_server::protocol::{
    decode, write_end, write_error, write_meta, write_meta_debug, write_meta_noop, write_number,
    write_stat, write_status, write_value, write_version, Decoded, GetCommand, Key, Limits,
    MetaCommand, MetaDebug, MetaItem, MetaReply, MetaStatus, ProtocolError, Request, Status,
    StoreCommand,
};

fn limits() -> Limits {
    Limits::default()
}

/// Decodes `input`, which must be exactly one request.
fn request(input: &[u8]) -> Request<'_> {
    match decode(input, &limits()) {
        Decoded::Request { request, consumed } => {
            assert_eq!(consumed, input.len(), "{:?}", String::from_utf8_lossy(input));
            request
        }
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

/// Decodes `input`, which must be refused: (reply line, bytes skipped, close).
fn refused(input: &[u8]) -> (Option<&'static str>, usize, bool) {
    match decode(input, &limits()) {
        Decoded::Error { reply, skip, close } => (reply.map(ProtocolError::as_str), skip, close),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

/// The reply line for a refused request that skips exactly its input.
fn error_of(input: &[u8]) -> Option<&'static str> {
    let (reply, skip, close) = refused(input);
    assert_eq!(skip, input.len(), "{:?}", String::from_utf8_lossy(input));
    assert!(!close);
    reply
}

const BAD_FORMAT: Option<&str> = Some("CLIENT_ERROR bad command line format");

#[test]
fn retrieval_commands() {
    let Request::Get { command, exptime, keys } = request(b"get a bb  ccc\r\n") else { panic!() };
    assert_eq!((command, exptime), (GetCommand::Get, None));
    assert_eq!(keys.collect::<Vec<_>>(), [&b"a"[..], b"bb", b"ccc"]);
    let Request::Get { command, .. } = request(b"gets a\n") else { panic!() };
    assert!(command.returns_cas());
    let Request::Get { command, exptime, keys } = request(b"gat -5 k\r\n") else { panic!() };
    assert_eq!((command, exptime), (GetCommand::Gat, Some(-5)));
    assert_eq!(keys.collect::<Vec<_>>(), [&b"k"[..]]);
    let Request::Get { command, exptime, .. } = request(b"gats 100 k\r\n") else { panic!() };
    assert_eq!((command, exptime), (GetCommand::Gats, Some(100)));
    // No noreply for retrieval: it is a key.
    let Request::Get { keys, .. } = request(b"get a noreply\r\n") else { panic!() };
    assert_eq!(keys.count(), 2);
    // A get of many keys, beyond the tokenizer's 23 tokens.
    let many: Vec<u8> = (0..100).flat_map(|i| format!(" k{i}").into_bytes()).collect();
    let line = [&b"get"[..], &many, b"\r\n"].concat();
    let Request::Get { keys, .. } = request(&line) else { panic!() };
    assert_eq!(keys.count(), 100);

    assert_eq!(error_of(b"get\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"gat 10\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"gat x k\r\n"), Some("CLIENT_ERROR invalid exptime argument"));
    assert_eq!(error_of(b"gat 99999999999 k\r\n"), Some("CLIENT_ERROR invalid exptime argument"));
    let long_key = [&b"get a "[..], &[b'k'; 251], b"\r\n"].concat();
    assert_eq!(error_of(&long_key), BAD_FORMAT);
    let max_key = [&b"get "[..], &[b'k'; 250], b"\r\n"].concat();
    assert!(matches!(request(&max_key), Request::Get { .. }));
}

#[test]
fn storage_commands() {
    let cases: [(&[u8], StoreCommand); 5] = [
        (b"set", StoreCommand::Set),
        (b"add", StoreCommand::Add),
        (b"replace", StoreCommand::Replace),
        (b"append", StoreCommand::Append),
        (b"prepend", StoreCommand::Prepend),
    ];
    for (name, expected) in cases {
        let input = [name, &b" k 5 -1 3\r\nabc\r\n"[..]].concat();
        let Request::Store { command, key, flags, exptime, cas, data, noreply } = request(&input)
        else {
            panic!()
        };
        assert_eq!((command, key, flags, exptime, cas), (expected, &b"k"[..], 5, -1, None));
        assert_eq!((data, noreply), (&b"abc"[..], false));
    }
    let Request::Store { command, cas, noreply, data, .. } =
        request(b"cas k 0 0 2 77 noreply\r\n\r\n\r\n")
    else {
        panic!()
    };
    assert_eq!((command, cas, noreply, data), (StoreCommand::Cas, Some(77), true, &b"\r\n"[..]));
    // Empty values, binary data and extra tokens.
    assert!(matches!(request(b"set k 0 0 0\r\n\r\n"), Request::Store { data: b"", .. }));
    assert!(matches!(
        request(b"set k 0 0 3 extra\r\n\0\n\r\r\n"),
        Request::Store { data: b"\0\n\r", .. }
    ));
    // Flags and exptime are read as C's strtoul/strtol read them, truncated to 32 bits.
    assert!(matches!(request(b"set k 4294967296 0 1\r\nx\r\n"), Request::Store { flags: 0, .. }));
    assert!(matches!(request(b"set k +7 0 1\r\nx\r\n"), Request::Store { flags: 7, .. }));
    assert!(matches!(request(b"set k 0 4294967297 1\r\nx\r\n"), Request::Store { exptime: 1, .. }));
}

#[test]
fn storage_errors() {
    // Too few tokens or a bad <bytes>: only the line is refused (the data is read as commands).
    assert_eq!(error_of(b"set k 0 0\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"set k 0 0 -1\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"set k 0 0 4294967296\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"set k 0 0 2147483646\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"set k 0 0 x noreply\r\n"), BAD_FORMAT);
    // Later faults swallow the data too, and noreply silences them.
    for (line, reply) in [
        (&b"set k x 0 3\r\n"[..], BAD_FORMAT),
        (b"set k -1 0 3\r\n", BAD_FORMAT),
        (b"set k 0 1.5 3\r\n", BAD_FORMAT),
        (b"cas k 0 0 3\r\n", BAD_FORMAT),
        (b"cas k 0 0 3 -1\r\n", BAD_FORMAT),
        (b"cas k 0 0 3 noreply\r\n", None),
        (b"set k\x01 0 0 3\r\n", BAD_FORMAT),
        (b"set k x 0 3 noreply\r\n", None),
    ] {
        assert_eq!(refused(line), (reply, line.len() + 5, false), "{line:?}");
    }
    let long_key = [&b"set "[..], &[b'k'; 251], b" 0 0 3\r\n"].concat();
    assert_eq!(refused(&long_key), (BAD_FORMAT, long_key.len() + 5, false));
    // Too large: swallowed whole, even before the data arrives.
    let too_large = b"set k 0 0 1048577\r\n";
    let reply = Some("SERVER_ERROR object too large for cache");
    assert_eq!(refused(too_large), (reply, too_large.len() + 1048577 + 2, false));
    let gib4 = b"set k 0 0 2147483645\r\n";
    assert_eq!(refused(gib4), (reply, gib4.len() + 2147483645 + 2, false));
    // The data must be followed by \r\n exactly.
    assert_eq!(error_of(b"set k 0 0 2\r\nabc\r"), Some("CLIENT_ERROR bad data chunk"));
    assert_eq!(error_of(b"set k 0 0 2\r\nab\n\n"), Some("CLIENT_ERROR bad data chunk"));
    assert_eq!(error_of(b"set k 0 0 2 noreply\r\nabcd"), None);
}

#[test]
fn other_text_commands() {
    assert_eq!(
        request(b"incr k 5\r\n"),
        Request::Arithmetic { incr: true, key: b"k", delta: 5, noreply: false }
    );
    assert_eq!(
        request(b"decr k 18446744073709551615 noreply\r\n"),
        Request::Arithmetic { incr: false, key: b"k", delta: u64::MAX, noreply: true }
    );
    let invalid_delta = Some("CLIENT_ERROR invalid numeric delta argument");
    assert_eq!(error_of(b"incr k -1\r\n"), invalid_delta);
    assert_eq!(error_of(b"incr k 18446744073709551616\r\n"), invalid_delta);
    assert_eq!(error_of(b"incr k x noreply\r\n"), None);
    assert_eq!(error_of(b"incr k\r\n"), BAD_FORMAT);

    assert_eq!(
        request(b"touch k 10 noreply\r\n"),
        Request::Touch { key: b"k", exptime: 10, noreply: true }
    );
    assert_eq!(error_of(b"touch k x\r\n"), Some("CLIENT_ERROR invalid exptime argument"));
    assert_eq!(error_of(b"touch k\r\n"), BAD_FORMAT);

    assert_eq!(request(b"delete k\r\n"), Request::Delete { key: b"k", noreply: false });
    assert_eq!(request(b"delete k noreply\r\n"), Request::Delete { key: b"k", noreply: true });
    assert_eq!(request(b"delete k 0\r\n"), Request::Delete { key: b"k", noreply: false });
    assert_eq!(request(b"delete k 0 noreply\r\n"), Request::Delete { key: b"k", noreply: true });
    // memcached 1.6.18's refusal of a delay (its parser of 2025 ignores the token).
    let usage = Some("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
    assert_eq!(error_of(b"delete k 10\r\n"), usage);
    assert_eq!(error_of(b"delete k 0 0\r\n"), usage);
    assert_eq!(error_of(b"delete k 10 noreply\r\n"), None, "noreply: no reply");
    assert_eq!(error_of(b"delete\r\n"), BAD_FORMAT);

    assert_eq!(request(b"flush_all\r\n"), Request::FlushAll { delay: 0, noreply: false });
    assert_eq!(request(b"flush_all noreply\r\n"), Request::FlushAll { delay: 0, noreply: true });
    assert_eq!(request(b"flush_all 30\r\n"), Request::FlushAll { delay: 30, noreply: false });
    assert_eq!(
        request(b"flush_all -1 noreply\r\n"),
        Request::FlushAll { delay: -1, noreply: true }
    );
    assert_eq!(error_of(b"flush_all x\r\n"), Some("CLIENT_ERROR invalid exptime argument"));
    assert_eq!(error_of(b"flush_all x noreply\r\n"), None);

    assert_eq!(request(b"stats\r\n"), Request::Stats { args: b"" });
    assert_eq!(request(b"stats items\r\n"), Request::Stats { args: b"items" });
    assert_eq!(request(b"stats detail dump\r\n"), Request::Stats { args: b"detail dump" });
    assert_eq!(request(b"version\r\n"), Request::Version);
    assert_eq!(request(b"quit\r\n"), Request::Quit);
    assert_eq!(request(b"verbosity 1\r\n"), Request::Verbosity { level: 1, noreply: false });
    assert_eq!(request(b"verbosity 5 noreply\r\n"), Request::Verbosity { level: 5, noreply: true });
    assert_eq!(error_of(b"verbosity\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"verbosity noreply\r\n"), None);
}

#[test]
fn unknown_and_malformed_lines() {
    assert_eq!(error_of(b"bogus\r\n"), Some("ERROR"));
    assert_eq!(error_of(b"GET k\r\n"), Some("ERROR"));
    assert_eq!(error_of(b" get k\r\n"), Some("ERROR"));
    assert_eq!(error_of(b"slabs reassign 1 2\r\n"), Some("ERROR"));
    assert_eq!(error_of(b"bogus noreply\r\n"), None);
    // Shorter than "mn\r\n".
    assert_eq!(error_of(b"\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"\n"), BAD_FORMAT);
    assert_eq!(error_of(b"mn\n"), BAD_FORMAT);
    // An HTTP request line closes the connection silently.
    assert_eq!(refused(b"GET / HTTP/1.1\r\n"), (None, 16, true));
}

#[test]
fn meta_get_flags() {
    let Request::MetaGet { key, flags } = request(b"mg foo s v t c f l h k O123 q u\r\n") else {
        panic!()
    };
    assert_eq!(key, Key::Text(b"foo"));
    assert!(flags.return_size && flags.return_value && flags.return_ttl && flags.return_cas);
    assert!(flags.return_flags && flags.return_last_access && flags.return_hit);
    assert!(flags.return_key && flags.quiet && flags.no_bump);
    assert_eq!(flags.opaque, Some(&b"123"[..]));
    let order: Vec<&[u8]> = flags.tokens().collect();
    assert_eq!(order[..3], [&b"s"[..], b"v", b"t"]);

    let Request::MetaGet { flags, .. } = request(b"mg foo N30 R10 T-1 E99 C5\r\n") else {
        panic!()
    };
    assert_eq!(
        (flags.vivify_ttl, flags.recache_ttl, flags.ttl, flags.explicit_cas, flags.compare_cas),
        (Some(30), Some(10), Some(-1), Some(99), Some(5))
    );
    // Mode and proxy flags are accepted by mg and ignored.
    let Request::MetaGet { flags, .. } = request(b"mg foo MZ P L\r\n") else { panic!() };
    assert_eq!(flags.mode, None);
    let Request::MetaGet { flags, .. } = request(b"mg foo\r\n") else { panic!() };
    assert_eq!(flags.tokens().count(), 0);

    // base64 keys.
    let Request::MetaGet { key, flags } = request(b"mg Zm9vAA== b v\r\n") else { panic!() };
    assert!(flags.base64_key && key.is_binary());
    assert_eq!(key.as_bytes(), b"foo\0");
    assert_eq!(error_of(b"mg Zm9 b\r\n"), Some("CLIENT_ERROR error decoding key"));
}

#[test]
fn meta_errors() {
    let bad_token = Some("CLIENT_ERROR bad token in command line format");
    for line in [&b"mg k Tx\r\n"[..], b"mg k T\r\n", b"mg k N1.5\r\n", b"mg k R-\x30x\r\n"] {
        assert_eq!(error_of(line), bad_token, "{line:?}");
    }
    assert_eq!(error_of(b"md k C-1\r\n"), bad_token);
    assert_eq!(error_of(b"md k E\r\n"), bad_token);
    assert_eq!(error_of(b"mg k v v\r\n"), Some("CLIENT_ERROR duplicate flag"));
    assert_eq!(error_of(b"mg k z\r\n"), Some("CLIENT_ERROR invalid flag"));
    assert_eq!(error_of(b"mg k 5\r\n"), Some("CLIENT_ERROR invalid flag"));
    // A flag that starts with neither a letter nor a digit fails the tokenizer.
    assert_eq!(error_of(b"mg k !\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"mg\r\n"), BAD_FORMAT);
    let many = b"mg k a b c d e f g h i j k l m n o p q r s\r\n";
    // 21 tokens.
    assert_eq!(error_of(many), Some("CLIENT_ERROR options flags are too long"));
    let long_key = [&b"mg "[..], &[b'k'; 251], b" v\r\n"].concat();
    assert_eq!(error_of(&long_key), BAD_FORMAT);
    assert_eq!(error_of(b"mg k\x7f v\r\n"), BAD_FORMAT);
    let opaque_31 = [&b"mg k O"[..], &[b'o'; 31], b"\r\n"].concat();
    assert!(matches!(request(&opaque_31), Request::MetaGet { .. }));
    let opaque_32 = [&b"mg k O"[..], &[b'o'; 32], b"\r\n"].concat();
    assert_eq!(error_of(&opaque_32), Some("CLIENT_ERROR opaque token too long"));
    // ma reports every flag error alike.
    assert_eq!(error_of(b"ma k v v\r\n"), Some("CLIENT_ERROR invalid or duplicate flag"));
    assert_eq!(error_of(b"ma k Dx\r\n"), Some("CLIENT_ERROR invalid or duplicate flag"));
    assert_eq!(error_of(b"mg k Dx\r\n"), Some("CLIENT_ERROR invalid numeric delta value"));
    assert_eq!(error_of(b"mg k J-1\r\n"), Some("CLIENT_ERROR invalid numeric initial value"));
    assert_eq!(error_of(b"ma k MX\r\n"), Some("CLIENT_ERROR invalid mode for ma M token"));
    // The last argument error is the one replied; F without a number keeps the default.
    assert_eq!(error_of(b"mg k Tx Dx\r\n"), Some("CLIENT_ERROR invalid numeric delta value"));
    assert_eq!(error_of(b"mg k Fx\r\n"), BAD_FORMAT);
    // Errors are replied in quiet mode too.
    assert_eq!(error_of(b"mg k q Tx\r\n"), bad_token);
}

#[test]
fn meta_set_delete_arithmetic_noop_debug() {
    let Request::MetaSet { key, flags, data } =
        request(b"ms k 3 T10 F5 C7 E8 I MA N60 q O1 k c s\r\nabc\r\n")
    else {
        panic!()
    };
    assert_eq!((key, data), (Key::Text(b"k"), &b"abc"[..]));
    assert_eq!((flags.ttl, flags.client_flags, flags.compare_cas), (Some(10), Some(5), Some(7)));
    assert_eq!((flags.explicit_cas, flags.mode, flags.vivify_ttl), (Some(8), Some(b'A'), Some(60)));
    assert!(flags.invalidate && flags.quiet && flags.return_key && flags.return_cas);
    for mode in [b'E', b'A', b'P', b'R', b'S'] {
        let line = [&b"ms k 1 M"[..], &[mode], b"\r\nx\r\n"].concat();
        assert!(matches!(request(&line), Request::MetaSet { .. }));
    }
    let Request::MetaSet { key, .. } = request(b"ms Zm9v 0 b\r\n\r\n") else { panic!() };
    assert_eq!(key.as_bytes(), b"foo");
    // A bad <datalen> refuses the line alone; flag faults swallow the data too.
    assert_eq!(error_of(b"ms k\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"ms k -1\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"ms k x T1\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"ms k 1 S100\r\nx\r\n"), Some("CLIENT_ERROR invalid flag"));
    assert_eq!(error_of(b"ms k 1 Me\r\nx\r\n"), Some("CLIENT_ERROR invalid mode for ms M token"));
    assert_eq!(error_of(b"ms k 1 M\r\nx\r\n"), Some("CLIENT_ERROR invalid mode for ms M token"));
    assert_eq!(error_of(b"ms k 1 q\r\nxyz"), Some("CLIENT_ERROR bad data chunk"));
    let too_large = b"ms k 2000000 T0\r\n";
    assert_eq!(
        refused(too_large),
        (Some("SERVER_ERROR object too large for cache"), too_large.len() + 2000002, false)
    );

    let Request::MetaDelete { key, flags } = request(b"md k q I T30 x C9 O2 k\r\n") else {
        panic!()
    };
    assert_eq!(key, Key::Text(b"k"));
    assert!(flags.quiet && flags.invalidate && flags.remove_value && flags.return_key);
    assert_eq!((flags.ttl, flags.compare_cas, flags.opaque), (Some(30), Some(9), Some(&b"2"[..])));

    let Request::MetaArithmetic { flags, .. } = request(b"ma k N0 J10 D5 MD v t c\r\n") else {
        panic!()
    };
    assert_eq!((flags.vivify_ttl, flags.initial, flags.delta), (Some(0), Some(10), Some(5)));
    assert_eq!(flags.mode, Some(b'D'));
    for mode in [&b"I"[..], b"+", b"D", b"-"] {
        let line = [&b"ma k M"[..], mode, b"\r\n"].concat();
        assert!(matches!(request(&line), Request::MetaArithmetic { .. }));
    }

    assert_eq!(request(b"mn\r\n"), Request::MetaNoop);
    assert_eq!(request(b"mn anything\r\n"), Request::MetaNoop);
    assert_eq!(request(b"me k\r\n"), Request::MetaDebug { key: Key::Text(b"k") });
    // memcached decodes me's base64 key only with a token after the `b`.
    assert_eq!(request(b"me Zm9v b\r\n"), Request::MetaDebug { key: Key::Text(b"Zm9v") });
    let Request::MetaDebug { key } = request(b"me Zm9v b x\r\n") else { panic!() };
    assert_eq!(key.as_bytes(), b"foo");
    assert_eq!(error_of(b"me Zm9 b x\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"me\r\n"), BAD_FORMAT);
}

/// Every request kind, for the pipelining and split tests.
const CORPUS: &[&[u8]] = &[
    b"get a b c\r\n",
    b"gets a\n",
    b"gat 10 a b\r\n",
    b"gats 0 a\r\n",
    b"set k 1 2 3\r\nabc\r\n",
    b"add k 0 0 0 noreply\r\n\r\n",
    b"replace k 0 0 1\r\n\n\r\n",
    b"append k 0 0 2\r\n\r\n\r\n",
    b"prepend k 0 0 1\r\nx\r\n",
    b"cas k 0 0 1 99\r\nx\r\n",
    b"incr k 1\r\n",
    b"decr k 1 noreply\r\n",
    b"touch k 1\r\n",
    b"delete k\r\n",
    b"flush_all 5\r\n",
    b"stats slabs\r\n",
    b"version\r\n",
    b"verbosity 1\r\n",
    b"mg k v O1 k\r\n",
    b"ms k 2 T0 MS\r\nhi\r\n",
    b"md k q\r\n",
    b"ma k D2 v\r\n",
    b"mn\r\n",
    b"me k\r\n",
    b"quit\r\n",
];

#[test]
fn pipelined_requests_decode_in_order() {
    let pipeline: Vec<u8> = CORPUS.concat();
    let mut at = 0;
    for expected in CORPUS {
        let Decoded::Request { request: got, consumed } = decode(&pipeline[at..], &limits()) else {
            panic!("at {at}")
        };
        assert_eq!(consumed, expected.len());
        assert_eq!(got, request(expected));
        at += consumed;
    }
    assert_eq!(at, pipeline.len());
    assert_eq!(decode(&pipeline[at..], &limits()), Decoded::NeedMore);
    // An error in the middle skips exactly its bytes.
    let mixed = b"bogus\r\nset k 0 0 1\r\nxyz\r\nmn\r\n";
    assert_eq!(refused(mixed), (Some("ERROR"), 7, false));
    assert_eq!(refused(&mixed[7..]), (Some("CLIENT_ERROR bad data chunk"), 16, false));
    // The 3 bytes read as data were "xyz"; the "\r\n" left is read as a (too short) line.
    assert_eq!(refused(&mixed[23..]), (Some("CLIENT_ERROR bad command line format"), 2, false));
    assert_eq!(request(&mixed[25..]), Request::MetaNoop);
}

#[test]
fn every_split_needs_more_until_whole() {
    let refusals: &[&[u8]] =
        &[b"bogus\r\n", b"set k 0 0 2\r\nabcd", b"mg k v v\r\n", b"set k x 0 3\r\nabc\r\n"];
    for input in CORPUS.iter().chain(refusals) {
        let whole = decode(input, &limits());
        assert!(!matches!(whole, Decoded::NeedMore));
        for split in 0..input.len() {
            let prefix = decode(&input[..split], &limits());
            // A refused storage line is decided before its data: the rest is swallowed.
            if let Decoded::Error { skip, .. } = prefix {
                assert_eq!(prefix, whole, "split {split} of {input:?}");
                assert_eq!(skip, input.len(), "{input:?}");
                continue;
            }
            assert_eq!(prefix, Decoded::NeedMore, "split {split} of {input:?}");
        }
    }
}

#[test]
fn hostile_input() {
    // 2 KiB without a newline: still waiting at 2048 bytes, closed at 2049.
    let junk = vec![b'x'; 2049];
    assert_eq!(decode(&junk[..2048], &limits()), Decoded::NeedMore);
    assert_eq!(refused(&junk), (None, 2049, true));
    let mut line = junk.clone();
    line[2048] = b'\n';
    assert_eq!(refused(&line), (Some("ERROR"), 2049, false));
    // A long get line is buffered up to its own limit, then closed.
    let small = Limits { item_max_bytes: 1 << 20, multiget_line_max_bytes: 4096 };
    let mut get = b"get ".to_vec();
    get.resize(4096, b'k');
    assert_eq!(decode(&get, &small), Decoded::NeedMore);
    get.push(b'k');
    assert_eq!(decode(&get, &small), Decoded::Error { reply: None, skip: 4097, close: true });
    let spaced = [&[b' '; 101][..], b"get ", &[b'k'; 2000]].concat();
    assert!(matches!(decode(&spaced, &small), Decoded::Error { close: true, .. }));
    // Negative numbers.
    assert_eq!(error_of(b"set k 0 0 -5\r\n"), BAD_FORMAT);
    // A lone "-" reads as 0 in memcached's signed parser.
    assert!(matches!(request(b"touch k -\r\n"), Request::Touch { exptime: 0, .. }));
    assert_eq!(error_of(b"touch k --1\r\n"), Some("CLIENT_ERROR invalid exptime argument"));
    assert_eq!(error_of(b"incr k -5\r\n"), Some("CLIENT_ERROR invalid numeric delta argument"));
    assert_eq!(error_of(b"ms k -2\r\n"), BAD_FORMAT);
    // Embedded NULs in keys and command names.
    assert_eq!(error_of(b"get a\0b\r\n"), BAD_FORMAT);
    assert_eq!(error_of(b"get\0 a\r\n"), Some("ERROR"));
    assert_eq!(refused(b"set a\0 0 0 1\r\nx\r\n"), (BAD_FORMAT, 17, false));
    assert_eq!(error_of(b"\0\0\0\r\n"), Some("ERROR"));
    // Keys of 251 bytes everywhere.
    let key = [b'k'; 251];
    for (before, after) in [
        (&b"delete "[..], &b"\r\n"[..]),
        (b"touch ", b" 1\r\n"),
        (b"incr ", b" 1\r\n"),
        (b"md ", b"\r\n"),
        (b"me ", b"\r\n"),
    ] {
        assert_eq!(error_of(&[before, &key, after].concat()), BAD_FORMAT, "{before:?}");
    }
    // ma names every fault of its flags and key alike.
    let ma = [&b"ma "[..], &key, b"\r\n"].concat();
    assert_eq!(error_of(&ma), Some("CLIENT_ERROR invalid or duplicate flag"));
}

#[test]
fn reply_writer_is_byte_exact() {
    let mut out = Vec::new();
    for status in [
        Status::Stored,
        Status::NotStored,
        Status::Exists,
        Status::NotFound,
        Status::Deleted,
        Status::Touched,
        Status::Ok,
        Status::Reset,
    ] {
        write_status(&mut out, status);
    }
    assert_eq!(
        out,
        b"STORED\r\nNOT_STORED\r\nEXISTS\r\nNOT_FOUND\r\nDELETED\r\nTOUCHED\r\nOK\r\nRESET\r\n"
    );
    out.clear();
    write_value(&mut out, b"a", 5, b"xy", None);
    write_value(&mut out, b"b", 0, b"", Some(42));
    write_end(&mut out);
    assert_eq!(out, b"VALUE a 5 2\r\nxy\r\nVALUE b 0 0 42\r\n\r\nEND\r\n");
    out.clear();
    write_number(&mut out, 18446744073709551615);
    write_stat(&mut out, "pid", 7);
    write_version(&mut out, "1.6.45");
    write_meta_noop(&mut out);
    write_error(&mut out, ProtocolError::NonNumericValue);
    write_error(&mut out, ProtocolError::OutOfMemoryStoring);
    assert_eq!(
        out,
        &b"18446744073709551615\r\nSTAT pid 7\r\nVERSION 1.6.45\r\nMN\r\n\
           CLIENT_ERROR cannot increment or decrement non-numeric value\r\n\
           SERVER_ERROR out of memory storing object\r\n"[..]
    );
}

fn meta_reply(
    line: &[u8],
    command: MetaCommand,
    status: MetaStatus,
    item: Option<&MetaItem>,
    value: Option<&[u8]>,
) -> Vec<u8> {
    let (key, flags) = match request(line) {
        Request::MetaGet { key, flags }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags }
        | Request::MetaSet { key, flags, .. } => (key, flags),
        other => panic!("{other:?}"),
    };
    let mut out = Vec::new();
    let reply = MetaReply { command, status, key: &key, flags: &flags, item, value };
    let written = write_meta(&mut out, &reply);
    assert_eq!(written, !out.is_empty());
    out
}

#[test]
fn meta_replies_echo_flags_in_request_order() {
    let item = MetaItem {
        size: 2,
        client_flags: 9,
        cas: 77,
        ttl_remaining: None,
        last_access: 3,
        fetched: true,
        token_sent: false,
        stale: true,
        won: true,
    };
    let (get, set, del, arith) =
        (MetaCommand::Get, MetaCommand::Set, MetaCommand::Delete, MetaCommand::Arithmetic);
    use MetaStatus::{En, Ex, Hd, Nf, Ns, Va};
    assert_eq!(
        meta_reply(b"mg k k v t O1 s c f l h q\r\n", get, Va, Some(&item), Some(b"hi")),
        b"VA 2 kk t-1 O1 s2 c77 f9 l3 h1 X W\r\nhi\r\n"
    );
    assert_eq!(meta_reply(b"mg k s\r\n", get, Hd, Some(&item), None), b"HD s2 X W\r\n");
    assert_eq!(meta_reply(b"mg k s k Oa\r\n", get, En, None, None), b"EN kk Oa\r\n");
    assert_eq!(meta_reply(b"mg k s q\r\n", get, En, None, None), b"");
    assert_eq!(meta_reply(b"mg Zm9v b k\r\n", get, En, None, None), b"EN kZm9v b\r\n");
    assert_eq!(
        meta_reply(b"ms k 1 c s k T0\r\nx\r\n", set, Hd, Some(&item), None),
        b"HD c77 s2 kk\r\n"
    );
    assert_eq!(meta_reply(b"ms k 1 c q\r\nx\r\n", set, Hd, Some(&item), None), b"");
    assert_eq!(meta_reply(b"ms k 1 c q O5\r\nx\r\n", set, Ns, None, None), b"NS c0 O5\r\n");
    assert_eq!(meta_reply(b"md k q\r\n", del, Hd, None, None), b"");
    assert_eq!(meta_reply(b"md k q O1 k c\r\n", del, Nf, None, None), b"NF O1 kk\r\n");
    assert_eq!(meta_reply(b"md k C1\r\n", del, Ex, None, None), b"EX\r\n");
    let counter = MetaItem { cas: 5, ttl_remaining: Some(30), ..MetaItem::default() };
    assert_eq!(
        meta_reply(b"ma k v t c N0 k\r\n", arith, Va, Some(&counter), Some(b"11")),
        b"VA 2 t30 c5 kk\r\n11\r\n"
    );
    assert_eq!(meta_reply(b"ma k q v\r\n", arith, Va, Some(&counter), Some(b"1")), b"");
    assert_eq!(meta_reply(b"ma k q O9 c\r\n", arith, Nf, None, None), b"NF O9\r\n");

    let mut out = Vec::new();
    let debug = MetaDebug { exp: -1, la: 2, cas: 3, fetched: false, cls: 1, size: 70 };
    write_meta_debug(&mut out, &Key::Text(b"k"), &debug);
    assert_eq!(out, b"ME k exp=-1 la=2 cas=3 fetch=no cls=1 size=70\r\n");
}

/// xorshift64*: a seeded, dependency-free source of test bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_bytes_never_panic_and_always_progress() {
    let mut rng = Rng(0x5eed_f00d);
    let alphabet = b"getsmadnv kqO0123456789 \r\n\r\n\0bTNRCEMFDJ-+=";
    for round in 0..20_000 {
        let len = rng.below(300);
        let input: Vec<u8> = match round % 3 {
            // Raw random bytes.
            0 => (0..len).map(|_| rng.next() as u8).collect(),
            // Bytes from the protocol's alphabet.
            1 => (0..len).map(|_| alphabet[rng.below(alphabet.len())]).collect(),
            // A corpus pipeline with a few bytes changed.
            _ => {
                let mut input: Vec<u8> =
                    (0..4).flat_map(|_| CORPUS[rng.below(CORPUS.len())].to_vec()).collect();
                for _ in 0..rng.below(4) {
                    let at = rng.below(input.len());
                    input[at] = alphabet[rng.below(alphabet.len())];
                }
                input
            }
        };
        ferrite_server::fuzz_protocol(&input);
    }
    // Long inputs reach the line limits.
    for _ in 0..50 {
        let len = 2000 + rng.below(3000);
        let input: Vec<u8> = (0..len).map(|_| alphabet[rng.below(alphabet.len())]).collect();
        ferrite_server::fuzz_protocol(&input);
        let mut get = b"get ".to_vec();
        get.extend((0..len).map(|_| if rng.below(8) == 0 { b' ' } else { b'k' }));
        ferrite_server::fuzz_protocol(&get);
    }
}
