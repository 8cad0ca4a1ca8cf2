module "gopkg.in/yaml.v3"

go 1.21
