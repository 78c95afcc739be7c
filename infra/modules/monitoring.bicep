// Log Analytics workspace and the workspace-based Application Insights component.
// Local (instrumentation-key) ingestion is disabled: telemetry needs an Entra ID token.

@description('Azure region.')
param location string

@description('Log Analytics workspace name.')
param workspaceName string

@description('Application Insights component name.')
param appInsightsName string

@description('Days logs are kept.')
@minValue(30)
@maxValue(730)
param retentionDays int

@description('Tags for every resource.')
param tags object

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: workspaceName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionDays
    features: {
      disableLocalAuth: true
    }
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
    IngestionMode: 'LogAnalytics'
  }
}

output WORKSPACE_ID string = workspace.id
output APP_INSIGHTS_NAME string = appInsights.name
output APP_INSIGHTS_ID string = appInsights.id
