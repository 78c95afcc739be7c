// Two user-assigned identities: one for the Function App, one shared by worker pools
// (AKS pods through workload identity, or Batch pools through a pool identity).

@description('Azure region.')
param location string

@description('Name of the Function App identity.')
param functionIdentityName string

@description('Name of the worker-pool identity.')
param workerIdentityName string

@description('OIDC issuer URL of an AKS cluster whose worker pods use the worker identity; empty to skip.')
param aksOidcIssuerUrl string

@description('Kubernetes namespace of the worker service account.')
param aksNamespace string

@description('Kubernetes service account the worker pods run as.')
param aksServiceAccount string

@description('Tags for every resource.')
param tags object

resource functionIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: functionIdentityName
  location: location
  tags: tags
}

resource workerIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: workerIdentityName
  location: location
  tags: tags
}

// Lets pods running as system:serviceaccount:<ns>:<sa> exchange their token for this identity.
resource aksFederation 'Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials@2023-01-31' = if (!empty(aksOidcIssuerUrl)) {
  parent: workerIdentity
  name: 'aks-${aksNamespace}-${aksServiceAccount}'
  properties: {
    issuer: aksOidcIssuerUrl
    subject: 'system:serviceaccount:${aksNamespace}:${aksServiceAccount}'
    audiences: [
      'api://AzureADTokenExchange'
    ]
  }
}

output FUNCTION_IDENTITY_ID string = functionIdentity.id
output FUNCTION_IDENTITY_CLIENT_ID string = functionIdentity.properties.clientId
output FUNCTION_IDENTITY_PRINCIPAL_ID string = functionIdentity.properties.principalId
output WORKER_IDENTITY_ID string = workerIdentity.id
output WORKER_IDENTITY_NAME string = workerIdentity.name
output WORKER_IDENTITY_CLIENT_ID string = workerIdentity.properties.clientId
output WORKER_IDENTITY_PRINCIPAL_ID string = workerIdentity.properties.principalId
