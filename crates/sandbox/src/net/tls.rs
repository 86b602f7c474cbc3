//! Just enough TLS to read the server name a client asks for in its `ClientHello`, so a
//! `CONNECT` tunnel to an allowed host cannot carry a handshake for another one.

/// The most a `ClientHello` record can take (one TLS record).
pub(crate) const MAX_RECORD: usize = 5 + (1 << 14);

/// What the first bytes of a tunnel say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    /// Not TLS at all (the tunnel carries something else).
    NotTls,
    /// More bytes are needed to read the whole record.
    Incomplete,
    /// A `ClientHello`, with its server name if it sent one.
    ServerName(Option<String>),
    Malformed,
}

/// Reads the first TLS record of a tunnel.
pub(crate) fn client_hello(bytes: &[u8]) -> Hello {
    let Some(&first) = bytes.first() else {
        return Hello::Incomplete;
    };
    if first != 0x16 {
        return Hello::NotTls;
    }
    if bytes.len() < 5 {
        return Hello::Incomplete;
    }
    let len = usize::from(u16::from_be_bytes([bytes[3], bytes[4]]));
    if bytes.len() < 5 + len {
        return Hello::Incomplete;
    }
    parse(&bytes[5..5 + len]).unwrap_or(Hello::Malformed)
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }

    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The server name of a handshake message; `None` when it is not a readable `ClientHello`.
fn parse(handshake: &[u8]) -> Option<Hello> {
    let mut c = Cursor(handshake);
    // msg_type client_hello (1), 24-bit length, version, random.
    if c.u8()? != 1 {
        return None;
    }
    c.take(3 + 2 + 32)?;
    c.vec8()?; // session id
    c.vec16()?; // cipher suites
    c.vec8()?; // compression methods
    if c.0.is_empty() {
        return Some(Hello::ServerName(None));
    }
    let mut extensions = Cursor(c.vec16()?);
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        if kind != 0 {
            continue;
        }
        let mut list = Cursor(Cursor(data).vec16()?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == 0 {
                let name = String::from_utf8(name.to_vec()).ok()?;
                return Some(Hello::ServerName(Some(name)));
            }
        }
    }
    Some(Hello::ServerName(None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// A minimal `ClientHello` record with one server name.
    fn hello(name: &str) -> Vec<u8> {
        let name = name.as_bytes();
        let mut sni = Vec::new();
        let entry_len = 3 + name.len();
        sni.extend_from_slice(&u16::try_from(entry_len).unwrap().to_be_bytes());
        sni.push(0);
        sni.extend_from_slice(&u16::try_from(name.len()).unwrap().to_be_bytes());
        sni.extend_from_slice(name);
        let mut extensions = vec![0, 0];
        extensions.extend_from_slice(&u16::try_from(sni.len()).unwrap().to_be_bytes());
        extensions.extend_from_slice(&sni);
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend_from_slice(&u16::try_from(extensions.len()).unwrap().to_be_bytes());
        body.extend_from_slice(&extensions);
        let mut handshake = vec![1, 0];
        handshake.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
        handshake.extend_from_slice(&body);
        let mut record = vec![0x16, 3, 1];
        record.extend_from_slice(&u16::try_from(handshake.len()).unwrap().to_be_bytes());
        record.extend_from_slice(&handshake);
        record
    }

    #[test]
    fn reads_the_server_name() {
        let record = hello("pypi.org");
        let got = vec![
            client_hello(&record),
            client_hello(&record[..10]),
            client_hello(b"GET / HTTP/1.1\r\n"),
            client_hello(&[0x16, 3, 1, 0, 2, 9, 9]),
        ];
        let want = vec![
            Hello::ServerName(Some("pypi.org".to_owned())),
            Hello::Incomplete,
            Hello::NotTls,
            Hello::Malformed,
        ];
        assert_eq!(got, want);
    }
}
