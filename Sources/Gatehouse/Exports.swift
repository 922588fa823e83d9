// The wire types (`JSONValue`, `ClientAPIErrorCode`, the request and response bodies) are part of the SDK's API.
@_exported import GatehouseWire
