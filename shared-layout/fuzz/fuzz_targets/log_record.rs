//! `LogRecord::decode` and the `LogRecords` iterator on arbitrary bytes: never
//! panic; each decoded record re-encodes to the bytes it came from; the iterator
//! either covers the whole input or ends with exactly one error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitkv_layout::log_record::{LogRecord, LogRecords, LOG_RECORD_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    if let Ok((rec, used)) = LogRecord::decode(data) {
        assert!(used <= data.len() && used <= LOG_RECORD_BYTES_MAX);
        assert_eq!(rec.encoded_len(), used);
        let mut out = Vec::new();
        rec.encode(&mut out);
        assert_eq!(out, &data[..used]);
    }
    let mut pos = 0;
    let mut it = LogRecords::new(data);
    for item in &mut it {
        match item {
            Ok(rec) => {
                let mut out = Vec::new();
                rec.encode(&mut out);
                assert_eq!(out, &data[pos..pos + out.len()]);
                pos += out.len();
            }
            Err(_) => {
                pos = usize::MAX;
                break;
            }
        }
    }
    assert!(it.next().is_none());
    assert!(pos == data.len() || pos == usize::MAX);
});
