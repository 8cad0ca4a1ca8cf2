package sdk

//go:generate go tool oapi-codegen -config oapi-models.yaml ../openapi/openapi.yaml
//go:generate go tool oapi-codegen -config oapi-client.yaml ../openapi/openapi.yaml
