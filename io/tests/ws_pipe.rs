//! A `WsClient` session on an in-memory transport (`WsClient::use_pipe`): it
//! connects without a loop, writes the upgrade into the pipe, opens on the
//! peer's 101, writes whole frames, blocks when the pipe has no room, and at a
//! cut reports each request in flight as the socket shell does: written (even in
//! part) Unknown, never written NotRun (refunded).

mod ws_common;

use ergon_io::core::{Budget, Class, Part, Verdict};
use ergon_io::ws::{Cause, SendError, Session, WsClient, WsConfig, WsEvent, WsId};
use ws_common::*;

fn open(client: &mut WsClient, id: WsId, b: &mut Budget) -> Vec<Ev> {
    client.connect(id, &REQ, Class::Normal, b, 0).unwrap();
    let pipe = client.pipe_mut(id).unwrap();
    assert!(pipe.is_connected());
    let request = String::from_utf8(pipe.take_written()).unwrap();
    assert!(request.starts_with("GET "), "{request}");
    let answer = switching(&request);
    pipe.deliver(answer.as_bytes());
    let mut evs = Vec::new();
    client.handle_timeout(b, 1, &mut |_, e: WsEvent<'_>, _: &mut Budget| {
        evs.push(Ev::of(e))
    });
    evs
}

/// A budget of 100 messages a second, a session in it on a pipe (no loop attached:
/// a socket connect would be refused as Unattached), not yet open; and the parts
/// each of its messages is charged.
fn piped() -> (Budget, [Part; 2], WsClient, WsId) {
    let (b, limits) = budget(100, 1000);
    let session: Session = Session::new(
        WsConfig::default(),
        &b,
        &limits.connect_parts(),
        &limits.message_parts(),
        7,
    )
    .unwrap();
    let mut client = WsClient::new(1);
    let id = client.add(session, "127.0.0.1:9".parse().unwrap());
    client.use_pipe(id).unwrap();
    (b, limits.message_parts(), client, id)
}

fn request(client: &mut WsClient, id: WsId, rid: u64, text: &str, b: &mut Budget, parts: &[Part]) {
    let t = b.try_charge(parts, Class::Normal, 2).unwrap();
    let s = client.session_mut(id).unwrap();
    s.send_request_charged(rid, text, t).unwrap();
    client.flush(id, b, 2);
}

#[test]
fn a_pipe_carries_the_session_and_a_cut_settles_what_it_held() {
    let (mut b, parts, mut client, id) = piped();
    assert_eq!(open(&mut client, id, &mut b), vec![Ev::Open]);
    request(&mut client, id, 1, "{\"id\":1}", &mut b, &parts);
    let mut written = client.pipe_mut(id).unwrap().take_written();
    let f = parse_client_frame(&mut written).unwrap();
    assert_eq!((f.opcode, &f.payload[..]), (0x1, &b"{\"id\":1}"[..]));
    assert!(written.is_empty());
    // Room for 3 bytes: request 2 goes out in part, request 3 not at all.
    client.pipe_mut(id).unwrap().set_room(3);
    request(&mut client, id, 2, "{\"id\":2}", &mut b, &parts);
    request(&mut client, id, 3, "{\"id\":3}", &mut b, &parts);
    assert_eq!(client.pipe_mut(id).unwrap().take_written().len(), 3);
    client.pipe_mut(id).unwrap().cut();
    let mut evs = Vec::new();
    client.handle_timeout(&mut b, 3, &mut |_, e: WsEvent<'_>, _: &mut Budget| {
        evs.push(Ev::of(e))
    });
    assert_eq!(
        evs,
        vec![
            Ev::Outcome(3, Verdict::NotRun),
            Ev::Outcome(1, Verdict::Unknown),
            Ev::Outcome(2, Verdict::Unknown),
            Ev::Closed(Cause::Transport, None, String::new()),
        ]
    );
    let pipe = client.pipe_mut(id).unwrap();
    assert!(!pipe.is_connected());
    // Nothing arrives on a transport that is down.
    pipe.deliver(b"late");
    pipe.set_room(usize::MAX);
    // It connects again on a fresh transport.
    assert_eq!(open(&mut client, id, &mut b), vec![Ev::Open]);
}

/// A request is sent when its frame's last byte is written: one written
/// whole at once is sent then; one partly written (pending, its first byte
/// counted by the venue) is not sent until the rest leaves, at that drive's
/// time; one still queued is not sent at all.
#[test]
fn a_request_is_written_when_its_last_byte_leaves() {
    let (mut b, parts, mut client, id) = piped();
    assert_eq!(open(&mut client, id, &mut b), vec![Ev::Open]);
    request(&mut client, id, 1, "{\"id\":1}", &mut b, &parts);
    let s = client.session(id).unwrap();
    assert_eq!(s.written_at(1), Some(2), "flushed whole at 2");
    client.pipe_mut(id).unwrap().set_room(3);
    request(&mut client, id, 2, "{\"id\":2}", &mut b, &parts);
    request(&mut client, id, 3, "{\"id\":3}", &mut b, &parts);
    let s = client.session(id).unwrap();
    assert_eq!(s.pending_requests(), 2, "requests 1 and 2 (in part) left");
    assert_eq!((s.written_at(2), s.written_at(3)), (None, None));
    // The socket drains at 50: the rest of both leaves then.
    client.pipe_mut(id).unwrap().set_room(usize::MAX);
    client.flush(id, &mut b, 50);
    let s = client.session(id).unwrap();
    assert_eq!((s.written_at(2), s.written_at(3)), (Some(50), Some(50)));
    assert!(client.session_mut(id).unwrap().resolve(2, &mut b, 60));
    let s = client.session(id).unwrap();
    assert_eq!((s.written_at(1), s.written_at(2)), (Some(2), None));
}

/// The requests still to be stamped are counted, not searched for: a request
/// answered after its last byte left does not take one out of that count, one
/// answered before (a venue may answer early) or cut does, and the requests
/// written in part around them are stamped when their last byte leaves.
#[test]
fn a_request_answered_or_cut_before_its_last_byte_leaves_others_are_stamped() {
    let (mut b, parts, mut client, id) = piped();
    assert_eq!(open(&mut client, id, &mut b), vec![Ev::Open]);
    request(&mut client, id, 1, "{\"id\":1}", &mut b, &parts);
    client.pipe_mut(id).unwrap().set_room(3);
    request(&mut client, id, 2, "{\"id\":2}", &mut b, &parts);
    // 1 (written whole) is answered while 2 waits in part.
    assert!(client.session_mut(id).unwrap().resolve(1, &mut b, 5));
    client.pipe_mut(id).unwrap().set_room(usize::MAX);
    client.flush(id, &mut b, 20);
    assert_eq!(client.session(id).unwrap().written_at(2), Some(20));
    // 3 is answered while part of it still waits; 4, written in part after it,
    // is stamped when its rest leaves.
    let _ = client.pipe_mut(id).unwrap().take_written();
    client.pipe_mut(id).unwrap().set_room(3);
    request(&mut client, id, 3, "{\"id\":3}", &mut b, &parts);
    assert!(client.session_mut(id).unwrap().resolve(3, &mut b, 21));
    client.pipe_mut(id).unwrap().set_room(usize::MAX);
    client.flush(id, &mut b, 22);
    let _ = client.pipe_mut(id).unwrap().take_written();
    client.pipe_mut(id).unwrap().set_room(3);
    request(&mut client, id, 4, "{\"id\":4}", &mut b, &parts);
    client.pipe_mut(id).unwrap().set_room(usize::MAX);
    client.flush(id, &mut b, 30);
    assert_eq!(client.session(id).unwrap().written_at(4), Some(30));
    // A cut with a request written in part; on the next connection a request
    // written in part is stamped when the rest leaves.
    client.pipe_mut(id).unwrap().set_room(3);
    request(&mut client, id, 5, "{\"id\":5}", &mut b, &parts);
    client.pipe_mut(id).unwrap().cut();
    client.handle_timeout(&mut b, 40, &mut |_, _: WsEvent<'_>, _: &mut Budget| {});
    client.pipe_mut(id).unwrap().set_room(usize::MAX);
    assert_eq!(open(&mut client, id, &mut b), vec![Ev::Open]);
    client.pipe_mut(id).unwrap().set_room(3);
    request(&mut client, id, 6, "{\"id\":6}", &mut b, &parts);
    assert_eq!(client.session(id).unwrap().written_at(6), None);
    client.pipe_mut(id).unwrap().set_room(usize::MAX);
    client.flush(id, &mut b, 70);
    assert_eq!(client.session(id).unwrap().written_at(6), Some(70));
}

/// An id is refused while it is queued or pending, whatever the order ids come
/// in: one above every id queued so far is taken without a look, one below is
/// looked for (and refused only if it is there), one resolved is free again.
#[test]
fn a_request_id_is_refused_while_queued_or_pending_in_any_order() {
    let (mut b, parts, mut client, id) = piped();
    assert_eq!(open(&mut client, id, &mut b), vec![Ev::Open]);
    let send = |client: &mut WsClient, b: &mut Budget, rid: u64| {
        let t = b.try_charge(&parts, Class::Normal, 2).unwrap();
        let s = client.session_mut(id).unwrap();
        match s.send_request_charged(rid, "{}", t) {
            Ok(()) => Ok(()),
            Err((e, t)) => {
                let _ = b.refund(t, 2);
                Err(e)
            }
        }
    };
    // 9 stays queued (no room), 5 and 7 go out.
    assert_eq!(send(&mut client, &mut b, 5), Ok(()));
    assert_eq!(send(&mut client, &mut b, 7), Ok(()));
    client.flush(id, &mut b, 2);
    client.pipe_mut(id).unwrap().set_room(0);
    assert_eq!(send(&mut client, &mut b, 9), Ok(()));
    client.flush(id, &mut b, 2);
    for taken in [5, 7, 9] {
        assert_eq!(
            send(&mut client, &mut b, taken),
            Err(SendError::DuplicateId),
            "{taken}"
        );
    }
    // Below the highest, not taken: accepted (and then taken).
    assert_eq!(send(&mut client, &mut b, 6), Ok(()));
    assert_eq!(send(&mut client, &mut b, 6), Err(SendError::DuplicateId));
    assert!(client.session_mut(id).unwrap().resolve(5, &mut b, 3));
    assert_eq!(send(&mut client, &mut b, 5), Ok(()));
    assert_eq!(send(&mut client, &mut b, 10), Ok(()));
}
