// What of the wire format an app sees: JSON values (custom user data, function payloads), the server's error codes,
// and the claims of a native auth ID token. The request and response bodies the SDK exchanges with the server are
// its own business: an app never builds them, and they may change without the SDK's API changing.
@_exported public import struct GatehouseWire.ClientAPIErrorCode
@_exported public import enum GatehouseWire.JSONValue
@_exported public import struct GatehouseWire.NativeAuthIDTokenClaims
