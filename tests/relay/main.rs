//! Integration tests: the real server on a spare loopback port.
