//! Just enough of Kafka's wire protocol to pair a request with its response
//! in a proxied byte stream: frame boundaries, and the header fields that
//! name a request and its correlation id.
//!
//! Every Kafka frame is a 4-byte big-endian size and that many bytes. A
//! request begins with api_key (i16), api_version (i16), correlation_id
//! (i32); a response begins with the correlation_id of its request. Headers
//! may be split over any number of chunks, and a chunk may hold many
//! frames, so each direction of a connection keeps a [`Frames`] from its
//! first byte on.

/// API key of EndTxn, the request that commits or aborts a transaction.
pub(super) const END_TXN: i16 = 26;

/// Bytes of a request frame that identify it: size, api_key, api_version,
/// correlation_id.
const REQUEST_HEADER: usize = 12;
/// Bytes of a response frame that pair it with its request: size,
/// correlation_id.
const RESPONSE_HEADER: usize = 8;

/// The identifying fields of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Request {
    pub(super) api_key: i16,
    pub(super) api_version: i16,
    pub(super) correlation_id: i32,
}

/// One response header found in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Response {
    /// Where the response's frame begins in the chunk: the bytes before it
    /// belong to earlier frames. 0 when it began in an earlier chunk.
    pub(super) start: usize,
    pub(super) correlation_id: i32,
}

/// Follows the frames of one direction of a connection across the chunks
/// it arrives in, collecting the first bytes of each frame.
#[derive(Debug)]
struct Frames {
    /// How many leading bytes of each frame (size included) to collect.
    header_len: usize,
    /// The current frame's leading bytes; `have` of them are known.
    header: [u8; REQUEST_HEADER],
    have: usize,
    /// Size field of the current frame, once its first 4 bytes are known.
    size: usize,
    /// Bytes of the current frame still to pass after its header.
    body_left: usize,
    /// A negative size: the stream is not Kafka framing, stop looking.
    lost: bool,
}

impl Frames {
    fn new(header_len: usize) -> Frames {
        Frames {
            header_len,
            header: [0; REQUEST_HEADER],
            have: 0,
            size: 0,
            body_left: 0,
            lost: false,
        }
    }

    /// Feeds the next chunk of the stream; calls `found(start, header)`
    /// for each frame whose first `header_len` bytes complete in it, with
    /// `start` as in [`Response::start`]. A frame too short to hold them is
    /// passed over.
    fn feed(&mut self, chunk: &[u8], mut found: impl FnMut(usize, &[u8])) {
        let mut i = 0;
        let mut start = 0;
        while i < chunk.len() && !self.lost {
            if self.body_left > 0 {
                let n = self.body_left.min(chunk.len() - i);
                self.body_left -= n;
                i += n;
                continue;
            }
            if self.have == 0 {
                start = i;
            }
            let want = if self.have < 4 { 4 } else { self.header_len };
            let n = (want - self.have).min(chunk.len() - i);
            self.header[self.have..self.have + n].copy_from_slice(&chunk[i..i + n]);
            self.have += n;
            i += n;
            if self.have == 4 && want == 4 {
                let size = i32::from_be_bytes(self.header[..4].try_into().expect("4 bytes"));
                let Ok(size) = usize::try_from(size) else {
                    self.lost = true;
                    return;
                };
                self.size = size;
                if size < self.header_len - 4 {
                    self.body_left = size;
                    self.have = 0;
                }
            } else if self.have == self.header_len {
                found(start, &self.header[..self.header_len]);
                self.body_left = self.size - (self.header_len - 4);
                self.have = 0;
            }
        }
    }
}

/// The requests a client sends on one connection.
#[derive(Debug)]
pub(super) struct Requests(Frames);

impl Requests {
    pub(super) fn new() -> Requests {
        Requests(Frames::new(REQUEST_HEADER))
    }

    /// The requests whose headers complete in `chunk`, the next bytes the
    /// client sent.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Vec<Request> {
        let mut found = Vec::new();
        self.0.feed(chunk, |_, h| {
            found.push(Request {
                api_key: i16::from_be_bytes([h[4], h[5]]),
                api_version: i16::from_be_bytes([h[6], h[7]]),
                correlation_id: i32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            })
        });
        found
    }
}

/// The responses a broker sends on one connection.
#[derive(Debug)]
pub(super) struct Responses(Frames);

impl Responses {
    pub(super) fn new() -> Responses {
        Responses(Frames::new(RESPONSE_HEADER))
    }

    /// The responses whose headers complete in `chunk`, the next bytes the
    /// broker sent.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Vec<Response> {
        let mut found = Vec::new();
        self.0.feed(chunk, |start, h| {
            found.push(Response {
                start,
                correlation_id: i32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            })
        });
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request frame with `body` after the fixed header fields.
    fn request(api_key: i16, api_version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
        let mut frame = ((8 + body.len()) as i32).to_be_bytes().to_vec();
        frame.extend(api_key.to_be_bytes());
        frame.extend(api_version.to_be_bytes());
        frame.extend(correlation_id.to_be_bytes());
        frame.extend(body);
        frame
    }

    fn response(correlation_id: i32, body: &[u8]) -> Vec<u8> {
        let mut frame = ((4 + body.len()) as i32).to_be_bytes().to_vec();
        frame.extend(correlation_id.to_be_bytes());
        frame.extend(body);
        frame
    }

    /// Feeds `stream` cut at `cuts` into a fresh scanner, returning what
    /// each chunk reported.
    fn responses_in_chunks(stream: &[u8], cuts: &[usize]) -> Vec<Vec<Response>> {
        let mut scanner = Responses::new();
        let mut bounds = vec![0];
        bounds.extend(cuts);
        bounds.push(stream.len());
        bounds
            .windows(2)
            .map(|w| scanner.feed(&stream[w[0]..w[1]]))
            .collect()
    }

    #[test]
    fn requests_are_identified_however_the_stream_is_cut() {
        let mut stream = request(3, 12, 1, b"metadata request body");
        stream.extend(request(END_TXN, 3, 2, &[0; 40]));
        stream.extend(request(0, 9, 3, &[]));
        let want = vec![
            Request {
                api_key: 3,
                api_version: 12,
                correlation_id: 1,
            },
            Request {
                api_key: END_TXN,
                api_version: 3,
                correlation_id: 2,
            },
            Request {
                api_key: 0,
                api_version: 9,
                correlation_id: 3,
            },
        ];
        assert_eq!(Requests::new().feed(&stream), want, "one chunk");
        for cut in 0..=stream.len() {
            let mut scanner = Requests::new();
            let mut found = scanner.feed(&stream[..cut]);
            found.extend(scanner.feed(&stream[cut..]));
            assert_eq!(found, want, "cut at {cut}");
        }
        let mut scanner = Requests::new();
        let byte_by_byte: Vec<Request> = stream.iter().flat_map(|b| scanner.feed(&[*b])).collect();
        assert_eq!(byte_by_byte, want, "byte by byte");
    }

    #[test]
    fn a_response_starts_where_its_frame_does() {
        let first = response(7, b"abc");
        let mut stream = first.clone();
        stream.extend(response(8, &[1; 30]));
        let chunks = responses_in_chunks(&stream, &[]);
        assert_eq!(
            chunks,
            vec![vec![
                Response {
                    start: 0,
                    correlation_id: 7
                },
                Response {
                    start: first.len(),
                    correlation_id: 8
                },
            ]]
        );
        // The second header split over two chunks: found in the second,
        // begun in the first (start 0: none of the second chunk precedes it).
        let chunks = responses_in_chunks(&stream, &[first.len() + 2]);
        assert_eq!(chunks[0].len(), 1);
        assert_eq!(
            chunks[1],
            vec![Response {
                start: 0,
                correlation_id: 8
            }]
        );
        // A chunk that begins with the end of an earlier frame.
        let chunks = responses_in_chunks(&stream, &[3]);
        assert_eq!(chunks[0], vec![]);
        assert_eq!(
            chunks[1],
            vec![
                Response {
                    start: 0,
                    correlation_id: 7
                },
                Response {
                    start: first.len() - 3,
                    correlation_id: 8
                },
            ]
        );
    }

    #[test]
    fn short_frames_are_passed_over_and_negative_sizes_end_the_scan() {
        // A frame of size 2 holds no correlation id; the next one is found.
        let mut stream = 2i32.to_be_bytes().to_vec();
        stream.extend([9, 9]);
        stream.extend(response(5, b"x"));
        let found = Responses::new().feed(&stream);
        assert_eq!(
            found,
            vec![Response {
                start: 6,
                correlation_id: 5
            }]
        );
        let mut scanner = Responses::new();
        assert_eq!(scanner.feed(&(-1i32).to_be_bytes()), vec![]);
        assert_eq!(scanner.feed(&response(5, b"x")), vec![], "not Kafka");
    }
}
