// Role assignments for one principal on one resource (a storage account, a Service Bus
// namespace or an Application Insights component of this resource group).
// Names are guid(scope, principal, role): stable across redeployments, unique per triple.
// The three `existing` references only compute resource ids; each loop runs for one kind.

@description('Kind of the scope resource.')
@allowed(['storage', 'servicebus', 'appinsights'])
param scopeKind string

@description('Name of the scope resource in this resource group.')
param scopeName string

@description('Object (principal) id of the managed identity that receives the roles.')
param principalId string

@description('Built-in role definition ids (GUIDs) to assign.')
param roleDefinitionIds array

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: scopeName
}

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: scopeName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: scopeName
}

resource onStorage 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in roleDefinitionIds: if (scopeKind == 'storage') {
  name: guid(storage.id, principalId, roleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource onNamespace 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in roleDefinitionIds: if (scopeKind == 'servicebus') {
  name: guid(namespace.id, principalId, roleId)
  scope: namespace
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]

resource onAppInsights 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in roleDefinitionIds: if (scopeKind == 'appinsights') {
  name: guid(appInsights.id, principalId, roleId)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}]
