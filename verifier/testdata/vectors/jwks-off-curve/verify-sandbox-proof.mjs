// stand-in for verify-sandbox-proof.mjs in the test vectors
