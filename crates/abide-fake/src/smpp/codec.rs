//! Framing that never fails on bad bytes: each PDU is cut by its `command_length` (checked
//! against [`MAX_PDU_BYTES`] before the body is read) and decoded by `rusmpp`; a PDU that
//! does not decode becomes [`Inbound::Invalid`] (answered with `generic_nack`) and the stream
//! goes on, since its length was sound. A length outside 16..=64 KiB cannot be resynchronised
//! and becomes [`Inbound::BadLength`]; everything after it is discarded.

use std::io;

use bytes::BytesMut;
use rusmpp::tokio_codec::CommandCodec;
use rusmpp::Command;
use tokio_util::codec::{Decoder, Encoder};

use super::config::MAX_PDU_BYTES;

/// The SMPP header: `command_length`, `command_id`, `command_status`, `sequence_number`.
const HEADER_LEN: usize = 16;

/// What the reader got.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A well-formed PDU.
    Pdu(Box<Command>),
    /// A PDU of sound length whose body did not decode.
    Invalid {
        command_id: u32,
        sequence_number: u32,
    },
    /// A `command_length` below 16 or above [`MAX_PDU_BYTES`]; the stream is unusable.
    BadLength {
        command_length: u32,
        sequence_number: u32,
    },
}

/// Decodes [`Inbound`], encodes `rusmpp` commands.
#[derive(Debug, Default)]
pub(crate) struct PduCodec {
    /// Set after a [`Inbound::BadLength`]: all further bytes are dropped.
    broken: bool,
    inner: CommandCodec,
}

fn be_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

impl Decoder for PduCodec {
    type Item = Inbound;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        if self.broken {
            src.clear();
            return Ok(None);
        }
        if src.len() < HEADER_LEN {
            return Ok(None);
        }
        let command_length = be_u32(&src[0..4]);
        let command_id = be_u32(&src[4..8]);
        let sequence_number = be_u32(&src[12..16]);
        let len = usize::try_from(command_length).unwrap_or(usize::MAX);
        if !(HEADER_LEN..=MAX_PDU_BYTES).contains(&len) {
            self.broken = true;
            src.clear();
            return Ok(Some(Inbound::BadLength {
                command_length,
                sequence_number,
            }));
        }
        if src.len() < len {
            src.reserve(len - src.len());
            return Ok(None);
        }
        let mut frame = src.split_to(len);
        // A fresh decoder per frame: the frame is whole, so it yields a command or an error.
        let decoded = CommandCodec::new()
            .with_max_length(MAX_PDU_BYTES)
            .decode(&mut frame);
        Ok(Some(match decoded {
            Ok(Some(c)) if c.pdu().is_some() => Inbound::Pdu(Box::new(c)),
            _ => Inbound::Invalid {
                command_id,
                sequence_number,
            },
        }))
    }
}

impl Encoder<Command> for PduCodec {
    type Error = io::Error;

    fn encode(&mut self, item: Command, dst: &mut BytesMut) -> Result<(), io::Error> {
        self.inner.encode(&item, dst).map_err(|e| match e {
            rusmpp::tokio_codec::EncodeError::Io(e) => e,
            other => io::Error::other(other.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusmpp::{CommandStatus, Pdu};

    fn frame(c: Command) -> BytesMut {
        let mut b = BytesMut::new();
        PduCodec::default().encode(c, &mut b).unwrap();
        b
    }

    #[test]
    fn a_whole_pdu_decodes_and_a_split_one_waits() {
        let mut b = frame(Command::new(CommandStatus::EsmeRok, 7, Pdu::EnquireLink));
        let mut part = b.split_to(10);
        let mut c = PduCodec::default();
        assert!(c.decode(&mut part).unwrap().is_none());
        part.unsplit(b);
        match c.decode(&mut part).unwrap() {
            Some(Inbound::Pdu(cmd)) => assert_eq!(cmd.sequence_number(), 7),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_lengths_are_refused_before_the_body_arrives() {
        let mut c = PduCodec::default();
        let mut b =
            BytesMut::from(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 9][..]);
        match c.decode(&mut b).unwrap() {
            Some(Inbound::BadLength {
                sequence_number: 9, ..
            }) => {}
            other => panic!("{other:?}"),
        }
        let mut more = frame(Command::new(CommandStatus::EsmeRok, 1, Pdu::EnquireLink));
        assert!(
            c.decode(&mut more).unwrap().is_none(),
            "broken stays broken"
        );
        let mut short = BytesMut::from(&[0, 0, 0, 8, 0, 0, 0, 21, 0, 0, 0, 0, 0, 0, 0, 1][..]);
        assert!(matches!(
            PduCodec::default().decode(&mut short).unwrap(),
            Some(Inbound::BadLength { .. })
        ));
    }

    #[test]
    fn garbage_bodies_become_invalid_and_never_panic() {
        // A deterministic xorshift stream of bodies under every command id we answer.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let ids = [
            0x1u32,
            0x2,
            0x4,
            0x9,
            0x6,
            0x15,
            0x80000005,
            0x8000_0000,
            0x1234,
        ];
        for round in 0..2_000 {
            let body_len = (next() % 120) as usize;
            let id = ids[round % ids.len()];
            let mut b = BytesMut::new();
            b.extend_from_slice(&((16 + body_len) as u32).to_be_bytes());
            b.extend_from_slice(&id.to_be_bytes());
            b.extend_from_slice(&0u32.to_be_bytes());
            b.extend_from_slice(&(round as u32).to_be_bytes());
            for _ in 0..body_len {
                b.extend_from_slice(&[next() as u8]);
            }
            let mut c = PduCodec::default();
            let got = c.decode(&mut b).unwrap();
            assert!(got.is_some(), "a whole frame always yields an item");
            assert!(b.is_empty(), "the frame is consumed");
        }
    }
}
