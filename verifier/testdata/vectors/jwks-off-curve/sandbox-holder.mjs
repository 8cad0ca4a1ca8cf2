// stand-in for sandbox-holder.mjs in the test vectors
