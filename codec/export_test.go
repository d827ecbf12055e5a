package codec

// V2Config exposes v2Config to the tests.
var V2Config = v2Config
